"""`agentengine dev` driven in a real pseudo-terminal (pexpect), as a person at a terminal runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pexpect

from agent_runtime.cli.client import OEClient
from agent_runtime.devloop.children import pid_alive
from tests.conftest import REPO_ROOT

AGENTENGINE = str(Path(sys.executable).parent / "agentengine")
START_TIMEOUT_S = 120  # two cores shared by many test processes: a langgraph import alone takes seconds


def cli_env(**extra: str) -> dict[str, str]:
    """The environment a person's shell gives the CLI (no kubeconfig: the dev loop's token is used)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTENGINE_", "KUBECONFIG"))}
    return {**env, "KUBECONFIG": "/nonexistent", "TERM": "xterm", "COLUMNS": "160", **extra}


def descendants(pid: int) -> list[int]:
    """Every process whose parent chain reaches `pid`."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


@dataclass
class DevSession:
    """One running `agentengine dev`, its addresses as it printed them."""

    child: pexpect.spawn
    banner: str
    oe_url: str
    token: str
    workdir: Path
    agent: str

    @classmethod
    def start(cls, directory: Path, *args: str, port: int, env: dict[str, str] | None = None) -> DevSession:
        child = pexpect.spawn(
            AGENTENGINE,
            ["dev", str(directory), "--port", str(port), *args],
            env=env or cli_env(),
            cwd=str(REPO_ROOT),
            encoding="utf-8",
            timeout=START_TIMEOUT_S,
            dimensions=(50, 200),
        )
        index = child.expect([r"Ctrl-C stops everything\.", pexpect.EOF, pexpect.TIMEOUT])
        banner = child.before or ""
        if index != 0:
            raise AssertionError(f"agentengine dev did not come up:\n{banner}")
        found = {
            "oe": re.search(r"OE\s+(http://\S+)", banner),
            "token": re.search(r"AGENTENGINE_TOKEN=(\S+)", banner),
            "files": re.search(r"files\s+(\S+)", banner),
            "agent": re.search(r"^agent (\S+)", banner, re.M),
        }
        missing = [name for name, match in found.items() if match is None]
        assert not missing, f"{missing} not in:\n{banner}"
        return cls(
            child=child,
            banner=banner,
            oe_url=found["oe"].group(1),  # type: ignore[union-attr]
            token=found["token"].group(1),  # type: ignore[union-attr]
            workdir=Path(found["files"].group(1)),  # type: ignore[union-attr]
            agent=found["agent"].group(1),  # type: ignore[union-attr]
        )

    def client(self) -> OEClient:
        return OEClient(server=self.oe_url, token=self.token)

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """The CLI in another terminal, pointed at this dev loop as its banner says."""
        env = cli_env(AGENTENGINE_SERVER=self.oe_url, AGENTENGINE_TOKEN=self.token)
        return subprocess.run(
            [AGENTENGINE, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def components(self) -> dict[str, int]:
        """RUNNER_MODE -> pid of each launcher the dev loop runs (and `model` for the stand-in)."""
        out: dict[str, int] = {}
        for pid in descendants(self.child.pid):
            try:
                env = environ_of(pid)
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "agent_runtime.launcher" in cmdline and "RUNNER_MODE" in env:
                out[env["RUNNER_MODE"]] = pid
            elif "scripted_model" in cmdline:
                out["model"] = pid
        return out

    def expect(self, pattern: str, *, timeout: float = 90) -> str:
        self.child.expect(pattern, timeout=timeout)
        return (self.child.before or "") + str(self.child.after or "")

    def wait(self, execution_id: str, *states: str, timeout: float = 60) -> dict[str, Any]:
        import time

        wanted = states or ("completed", "failed", "suspended", "cancelled")
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while True:
                view = client.execution(execution_id)
                if view["status"] in wanted:
                    return view
                assert time.monotonic() < deadline, f"still {view['status']}: {view}"
                time.sleep(0.1)

    def interrupt(self) -> tuple[str, list[int]]:
        """Ctrl-C at the terminal; returns what it printed and the pids that were running before."""
        started = descendants(self.child.pid)
        self.child.sendintr()
        self.child.expect(pexpect.EOF, timeout=60)
        self.child.close()
        return self.child.before or "", started

    def close(self) -> None:
        if self.child.isalive():
            self.child.sendintr()
            try:
                self.child.expect(pexpect.EOF, timeout=30)
            except pexpect.TIMEOUT:
                self.child.terminate(force=True)
        self.child.close()


def gone(pids: list[int]) -> list[int]:
    """The pids still alive."""
    return [pid for pid in pids if pid_alive(pid)]
