"""Starting the MCP server behind OAuth and its authorization server (`mcp_oauth_server.py`) on loopback.

Same venv as the plain MCP peer (the official SDK, `mcp_peer.mcp_python`).
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

from tests.conftest import free_port, wait_for_port
from tests.providers.mcp_peer import mcp_python

SERVER = Path(__file__).with_name("mcp_oauth_server.py")
CLIENT_ID = "agent-client"
CLIENT_SECRET = "oauth-Canary-secret-7d21c4"


@dataclass
class OAuthPeer:
    port: int
    as_port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.as_port}/"

    def stats(self) -> dict[str, Any]:
        return dict(httpx.get(f"{self.issuer}control/stats", timeout=5).json())

    def issued(self, grant: str) -> int:
        return int(self.stats()["issued"].get(grant, 0))

    def revoke(self, *, refresh: bool = False) -> None:
        httpx.post(f"{self.issuer}control/revoke", json={"refresh": refresh}, timeout=5).raise_for_status()

    def set_ttl(self, seconds: int) -> None:
        httpx.post(f"{self.issuer}control/ttl", json={"seconds": seconds}, timeout=5).raise_for_status()

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
def mcp_oauth_server(*, ttl: int = 3600, dcr: bool = True) -> Iterator[OAuthPeer]:
    """The MCP server and its authorization server on 127.0.0.1, stopped at exit."""
    python = mcp_python()
    port, as_port = free_port(), free_port()
    with tempfile.NamedTemporaryFile(prefix="mcp-oauth-", suffix=".log", delete=False) as handle:
        log = Path(handle.name)
    argv = [str(python), str(SERVER), "--port", str(port), "--as-port", str(as_port)]
    argv += ["--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET, "--ttl", str(ttl)]
    if not dcr:
        argv.append("--no-dcr")
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    peer = OAuthPeer(port=port, as_port=as_port, process=process, log=log)
    try:
        wait_for_port("127.0.0.1", port, timeout=30, proc=process)
        wait_for_port("127.0.0.1", as_port, timeout=30, proc=process)
        deadline = time.monotonic() + 10
        while True:
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
