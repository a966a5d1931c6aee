"""Shared fixtures: tier markers by folder, free loopback ports, supervised subprocesses."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
_TIERS = ("unit", "integration", "security", "crash", "cluster", "chaos", "e2e", "browser", "benchmarks")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with the tier named by its folder, so `-m unit` etc. select by tier."""
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO_ROOT).parts
        if len(parts) > 1 and parts[0] == "tests" and parts[1] in _TIERS and parts[1] != "benchmarks":
            item.add_marker(getattr(pytest.mark, parts[1]))


_HANDED_OUT: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it), never one this process handed out before:
    the OS may give a just-closed port again, and two fields' defaults taken in a row (an OE's and an AER's)
    would then be one port, the second process's readiness probe answered by the first."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(100):
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("the OS gave only ports this test process had handed out already")


def wait_for_port(
    host: str, port: int, *, timeout: float = 15.0, proc: subprocess.Popen | None = None
) -> None:
    """Block until something accepts on host:port; fail early if `proc` died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {host}:{port}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


@dataclass
class Process:
    """A child process whose combined output goes to a file we can show on failure."""

    argv: list[str]
    popen: subprocess.Popen
    log_path: Path
    name: str = field(default="")

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, *, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        """Signal the process group, escalate to SIGKILL, and return the exit code."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=5)
        return int(self.popen.returncode)


@pytest.fixture
def spawn(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Process]]:
    """Start subprocesses that are always killed at teardown; their output is printed if the test failed."""
    started: list[Process] = []

    def _spawn(
        argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None, name: str = ""
    ) -> Process:
        log_path = Path(tempfile.mkstemp(prefix=f"{name or 'proc'}-", suffix=".log", dir=tmp_path)[1])
        log = log_path.open("wb")
        popen = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # own process group: stop() reaches grandchildren too
        )
        log.close()
        proc = Process(argv=argv, popen=popen, log_path=log_path, name=name or Path(argv[0]).name)
        started.append(proc)
        return proc

    yield _spawn

    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for proc in started:
        proc.stop(timeout=5)
        if failed:
            sys.stderr.write(f"\n----- output of {proc.name} (exit {proc.popen.returncode}) -----\n")
            sys.stderr.write(proc.output()[-20000:])


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Expose each phase's report on the item so fixtures can tell whether the test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(scope="module")
def module_spawn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Process]]:
    """`spawn` for a whole module: every process is stopped at its end, its output shown if a test failed."""
    logs = tmp_path_factory.mktemp("logs")
    started: list[Process] = []

    def spawn(argv: list[str], *, env: dict[str, str] | None = None, name: str = "", **_: object) -> Process:
        log_path = Path(tempfile.mkstemp(prefix=f"{name or 'proc'}-", suffix=".log", dir=logs)[1])
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                argv,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        proc = Process(argv=argv, popen=popen, log_path=log_path, name=name)
        started.append(proc)
        return proc

    yield spawn
    for proc in started:
        with contextlib.suppress(Exception):
            proc.stop(timeout=5)
