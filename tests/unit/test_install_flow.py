"""The shared install journey's polling (tests/install_flow.py): a port-forward that is not listening yet."""

from __future__ import annotations

import http.server
import os
import stat
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port
from tests.install_flow import Kube, StepFailed, eventually, port_forward


def test_eventually_retries_a_port_that_is_not_listening_yet() -> None:
    port = free_port()
    server: list[http.server.HTTPServer] = []

    def serve_later() -> None:
        time.sleep(0.5)
        server.append(http.server.HTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler))
        server[0].serve_forever()

    threading.Thread(target=serve_later, daemon=True).start()
    try:
        status = eventually(
            "the server", lambda: httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code, interval=0.1
        )
        assert status == 200
    finally:
        while not server:
            time.sleep(0.05)
        server[0].shutdown()


def _fake_kubectl(tmp_path: Path, body: str) -> Kube:
    script = tmp_path / "kubectl"
    script.write_text(f"#!/bin/sh\necho $$ > {tmp_path / 'pid'}\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return Kube(bin_dir=tmp_path, env=dict(os.environ))


def test_port_forward_that_never_listens_fails_and_is_stopped(tmp_path: Path) -> None:
    kube = _fake_kubectl(tmp_path, "exec sleep 600")
    forward = port_forward(kube, namespace="ns", service="tool", remote=8002, timeout=1.0)
    with pytest.raises(StepFailed, match="port-forward to ns/svc/tool:8002"), forward:
        pass
    pid = int((tmp_path / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_port_forward_that_exits_fails_at_once(tmp_path: Path) -> None:
    kube = _fake_kubectl(tmp_path, "echo 'error: services \"tool\" not found' >&2; exit 1")
    began = time.monotonic()
    forward = port_forward(kube, namespace="ns", service="tool", remote=8002, timeout=30.0)
    with pytest.raises(AssertionError, match="not found"), forward:
        pass
    assert time.monotonic() - began < 10
