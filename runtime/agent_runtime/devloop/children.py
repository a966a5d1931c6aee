"""Child processes that cannot outlive their parent: own process group, parent-death signal, logs on disk.

`agentengine dev` and the `make run` demo start their components with these; the test tiers use them too.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1
# Resolved before any fork: the child between fork and exec should only make the one call.
_LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: the kernel sends SIGKILL when the parent dies.

    This is what cleans up when the parent itself is SIGKILLed and no Python code of ours runs.
    """
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Child:
    """One running component; its stdout and stderr go to `log_path`."""

    name: str
    argv: list[str]
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, *, grace: float = 5.0) -> None:
        """SIGTERM the whole process group, then SIGKILL it after `grace` seconds."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=grace)
        # The leader may be gone while something it started still holds the group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)


def start_child(
    name: str, argv: list[str], *, log_dir: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Child:
    """Start `argv` in a new session whose processes get SIGKILL when this process dies."""
    log_path = log_dir / f"{name}.log"
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # only async-signal-safe work: one prctl call
        )
    return Child(name=name, argv=argv, popen=popen, log_path=log_path)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_gone(pids: list[int], *, timeout: float = 10.0) -> list[int]:
    """Wait until none of `pids` is alive; return the ones still alive at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid in pids if pid_alive(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def stop_all(children: list[Child], *, grace: float = 3.0) -> None:
    """SIGTERM every child's process group at once, SIGKILL what is left after `grace` seconds."""
    for child in children:
        if child.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for child in children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
    for child in children:
        child.stop(grace=0.0)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_taken(port: int, host: str = "127.0.0.1") -> bool:
    """Whether binding `host:port` fails now (someone listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False
