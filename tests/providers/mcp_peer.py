"""Starting the real MCP server (`mcp_server.py`, the official `mcp` SDK) on loopback, from our tests.

The SDK lives in its own virtual environment under ~/.cache/agent-engine (made once, like the benchmarks'
peers): it is a test peer, not a dependency of ours.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.benchmarks.peer_process import ensure_venv
from tests.conftest import free_port, wait_for_port

MCP_REQUIREMENTS = ["mcp==2.3.0"]
SERVER = Path(__file__).with_name("mcp_server.py")
MCP_TOKEN = "mcp-Canary-token-4f1e9b"


def mcp_python() -> Path:
    """The interpreter of the venv holding the official SDK (installed on first use)."""
    return ensure_venv("mcp-venv", MCP_REQUIREMENTS)


@dataclass
class McpPeer:
    port: int
    mode: str
    token: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stats(self) -> dict[str, Any]:
        return dict(httpx.get(f"http://127.0.0.1:{self.port}/control/stats", timeout=5).json())

    def set_generation(self, generation: int) -> None:
        httpx.post(
            f"http://127.0.0.1:{self.port}/control/generation", json={"generation": generation}, timeout=5
        ).raise_for_status()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


@contextlib.contextmanager
def mcp_server(
    *,
    mode: str = "json",
    token: str = MCP_TOKEN,
    page_size: int = 4,
    fillers: int = 3,
    port: int | None = None,
    echo_auth: bool = False,
) -> Iterator[McpPeer]:
    """A running server on 127.0.0.1 (JSON or SSE answers), stopped at exit."""
    python = mcp_python()
    port = port or free_port()
    with tempfile.NamedTemporaryFile(prefix=f"mcp-{mode}-", suffix=".log", delete=False) as handle:
        log = Path(handle.name)
    argv = [str(python), str(SERVER), "--port", str(port), "--mode", mode, "--token", token]
    argv += ["--page-size", str(page_size), "--fillers", str(fillers)]
    if echo_auth:
        argv.append("--echo-auth")
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    peer = McpPeer(port=port, mode=mode, token=token, process=process, log=log)
    try:
        wait_for_port("127.0.0.1", port, timeout=30, proc=process)
        deadline = time.monotonic() + 10
        while True:  # the control route answers once the app (not only the socket) is up
            try:
                peer.stats()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield peer
    finally:
        peer.stop()
        log.unlink(missing_ok=True)
