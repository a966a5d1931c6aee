"""The shared fixtures themselves, against real processes."""

import socket
import sys

import httpx

from tests.conftest import free_port, wait_for_port


def test_spawned_server_serves_then_is_stopped(spawn) -> None:
    port = free_port()
    proc = spawn([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], name="http-server")
    wait_for_port("127.0.0.1", port, proc=proc.popen)
    assert httpx.get(f"http://127.0.0.1:{port}/").status_code == 200

    proc.stop()

    assert proc.popen.poll() is not None
    assert "GET / HTTP/1.1" in proc.output()
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
