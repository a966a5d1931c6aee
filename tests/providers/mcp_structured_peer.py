"""Starting the FastMCP-style MCP server (`mcp_structured_server.py`) on loopback, in the MCP peer's venv."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import free_port, wait_for_port
from tests.providers.mcp_peer import mcp_python

SERVER = Path(__file__).with_name("mcp_structured_server.py")


@dataclass
class StructuredPeer:
    port: int
    mode: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def structured_server(*, mode: str = "json") -> Iterator[StructuredPeer]:
    """A running server on 127.0.0.1 (JSON or SSE answers), stopped at exit."""
    python = mcp_python()
    port = free_port()
    with tempfile.NamedTemporaryFile(prefix=f"mcp-structured-{mode}-", suffix=".log", delete=False) as handle:
        log = Path(handle.name)
    argv = [str(python), str(SERVER), "--port", str(port), "--mode", mode]
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_for_port("127.0.0.1", port, timeout=30, proc=process)
        yield StructuredPeer(port=port, mode=mode, process=process, log=log)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        log.unlink(missing_ok=True)
