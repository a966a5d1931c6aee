"""A Memory server started by the launcher (`RUNNER_MODE=memory`) on loopback, as the operator renders it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.conftest import REPO_ROOT, Process, free_port, wait_for_port

TOKEN = "memory-test-runtime-token-0123456789"


@dataclass
class MemoryServer:
    base_url: str
    token: str
    process: Process

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url, headers={"authorization": f"Bearer {self.token}"}, timeout=30
        )


def memory_env(
    tmp_path: Path, *, port: int, app_id: str, token: str = TOKEN, extra: dict[str, str] | None = None
) -> dict[str, str]:
    token_file = tmp_path / f"token-{port}"
    token_file.write_text(token)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(REPO_ROOT),
        "RUNNER_MODE": "memory",
        "APP_HOST": "127.0.0.1",
        "RUNTIME_PORT": str(port),
        "RUNTIME_TOKEN_FILE": str(token_file),
        "STRUCTURED_LOGGING": "true",
        "APP_ID": app_id,
        "MEMORY_STORE_TYPE": "sqlite",
        "MEMORY_SQLITE_PATH": str(tmp_path / "memory" / "memory.db"),
    }
    env.update(extra or {})
    return env


def start_memory(
    spawn: Callable[..., Process],
    tmp_path: Path,
    *,
    app_id: str = "team-a.echo",
    token: str = TOKEN,
    extra: dict[str, str] | None = None,
) -> MemoryServer:
    """Start one server and wait until /readyz says ready."""
    port = free_port()
    env = memory_env(tmp_path, port=port, app_id=app_id, token=token, extra=extra)
    process = spawn([sys.executable, "-m", "agent_runtime.launcher"], env=env, name=f"memory-{app_id}")
    wait_for_port("127.0.0.1", port, timeout=30, proc=process.popen)
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while httpx.get(f"{base_url}/readyz").status_code != 200:
        if time.monotonic() > deadline:
            raise TimeoutError(f"memory server not ready:\n{process.output()[-4000:]}")
        time.sleep(0.05)
    return MemoryServer(base_url=base_url, token=token, process=process)


@contextlib.contextmanager
def memory_process(
    tmp_path: Path, *, app_id: str = "team-a.echo", token: str = TOKEN, extra: dict[str, str] | None = None
) -> Iterator[MemoryServer]:
    """`start_memory` for a fixture wider than one test: the process is stopped on exit."""
    started: list[Process] = []

    def spawn(argv: list[str], *, env: dict[str, str], name: str) -> Process:
        log_path = tmp_path / f"{name}-{len(started)}.log"
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                argv,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        process = Process(argv=argv, popen=popen, log_path=log_path, name=name)
        started.append(process)
        return process

    try:
        yield start_memory(spawn, tmp_path, app_id=app_id, token=token, extra=extra)
    finally:
        for process in started:
            process.stop(timeout=10)
