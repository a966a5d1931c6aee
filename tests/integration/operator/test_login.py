"""The operator's own API client through credential changes, against a real HTTP server on loopback.

The server accepts only the tokens a test says are valid now, as an API server does once a token expired
or was revoked. The exec plugin login runs in a process of its own, as the operator does (the client
library reads KUBECONFIG when it is first imported).
"""

from __future__ import annotations

import asyncio
import hashlib
import http.server
import json
import logging
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from agent_operator.kube import ApiError, Connection, KubeApi
from agent_operator.login import ApiAuth
from tests.conftest import REPO_ROOT
from tests.exec_credential import exec_user
from tests.mounted_secret import mount_secret_key

FIRST = "operator-token-first-0a1b"
SECOND = "operator-token-second-2c3d"


@dataclass
class ApiServer:
    url: str
    valid: set[str] = field(default_factory=set)
    seen: Counter[str] = field(default_factory=Counter)  # "ok" / "401" counts, never a token


@pytest.fixture
def api_server() -> Iterator[ApiServer]:
    server_state = ApiServer(url="")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            header = self.headers.get("Authorization", "")
            ok = header.startswith("Bearer ") and header[7:] in server_state.valid
            server_state.seen["ok" if ok else "401"] += 1
            body = json.dumps({"kind": "Namespace"} if ok else {"kind": "Status", "message": "Unauthorized"})
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            return

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield server_state
    httpd.shutdown()
    httpd.server_close()


def _api(server: ApiServer, auth: ApiAuth) -> KubeApi:
    return KubeApi(Connection(server=server.url, insecure=True, auth=auth))


def test_a_rotated_token_file_is_used_before_the_old_token_is_refused(
    api_server: ApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = mount_secret_key(tmp_path / "sa", FIRST)
    auth = ApiAuth(FIRST, relogin=lambda: path.read_text(), token_file=path, check_interval_s=0.0)
    api = _api(api_server, auth)

    async def scenario() -> None:
        api_server.valid = {FIRST}
        assert await api.get("/api/v1/namespaces/default") is not None
        mount_secret_key(tmp_path / "sa", SECOND)  # the kubelet's rotation; the old token then expires
        api_server.valid = {SECOND}
        for _ in range(5):
            assert await api.get("/api/v1/namespaces/default") is not None
        await api.aclose()

    with caplog.at_level(logging.INFO, logger="agent_operator.login"):
        asyncio.run(scenario())
    assert api_server.seen == Counter({"ok": 6}) and auth.renewals == 0
    assert "API token file changed" in caplog.text and FIRST not in caplog.text and SECOND not in caplog.text


def test_a_401_logs_in_once_for_every_request_refused_and_each_is_sent_again(
    api_server: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    plugin = {"token": FIRST}
    logins: list[int] = []

    def relogin() -> str:
        logins.append(1)
        return plugin["token"]

    auth = ApiAuth(FIRST, relogin=relogin)
    api = _api(api_server, auth)

    async def scenario() -> None:
        api_server.valid = {FIRST}
        assert await api.get("/api/v1/namespaces/a") is not None
        api_server.valid, plugin["token"] = {SECOND}, SECOND  # expired; the plugin now prints another
        answers = await asyncio.gather(*(api.get(f"/api/v1/namespaces/n{i}") for i in range(20)))
        assert all(answer is not None for answer in answers)
        await api.aclose()

    with caplog.at_level(logging.INFO, logger="agent_operator.login"):
        asyncio.run(scenario())
    assert len(logins) == 1 and auth.renewals == 1
    assert api_server.seen["ok"] == 21
    assert "logged in again after a 401" in caplog.text and SECOND not in caplog.text


def test_a_watch_refused_with_401_logs_in_again_and_watches_once_more(api_server: ApiServer) -> None:
    plugin = {"token": FIRST}
    auth = ApiAuth(FIRST, relogin=lambda: plugin["token"])
    api = _api(api_server, auth)

    async def scenario() -> list[dict[str, object]]:
        api_server.valid, plugin["token"] = {SECOND}, SECOND
        events = [e async for e in api.watch_metadata("/api/v1/configmaps", resource_version="1")]
        await api.aclose()
        return events

    assert asyncio.run(scenario()) == [{"kind": "Namespace"}]
    assert auth.renewals == 1 and api_server.seen == Counter({"401": 1, "ok": 1})
    assert api.requests == Counter({"WATCH": 1})


def test_a_401_a_new_login_cannot_fix_is_reported_without_the_token(
    api_server: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    api = _api(api_server, ApiAuth(FIRST, relogin=lambda: FIRST))

    async def scenario() -> None:
        api_server.valid = set()
        with pytest.raises(ApiError) as caught:
            await api.get("/api/v1/namespaces/a")
        assert caught.value.status == 401 and FIRST not in str(caught.value)
        await api.aclose()

    with caplog.at_level(logging.WARNING, logger="agent_operator.login"):
        asyncio.run(scenario())
    assert "a new login gave the same one" in caplog.text and FIRST not in caplog.text


def test_an_exec_plugin_kubeconfig_logs_in_through_the_client_library(tmp_path: Path) -> None:
    token_file, calls = tmp_path / "plugin-token", tmp_path / "calls"
    token_file.write_text(FIRST)
    ca = base64_pem()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": ca}}
        ],
        "users": [{"name": "eks-user", "user": exec_user(token_file=token_file, calls_file=calls)}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "eks-user"}}],
        "current-context": "ctx",
    }
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(yaml.safe_dump(config))
    script = (
        "import hashlib, json, logging, kopf\n"
        "from agent_operator.login import login_info\n"
        "info = login_info(settings=kopf.OperatorSettings(), logger=logging.getLogger('t'))\n"
        "digest = hashlib.sha256(info.token.encode()).hexdigest()\n"
        "print(json.dumps({'server': info.server, 'digest': digest}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={
            "KUBECONFIG": str(kubeconfig),
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "PYTHONPATH": str(REPO_ROOT),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer == {
        "server": "https://127.0.0.1:6443",
        "digest": hashlib.sha256(FIRST.encode()).hexdigest(),
    }
    assert calls.read_text().splitlines() == ["login"]
    assert FIRST not in done.stderr


def base64_pem() -> str:
    """A CA certificate, inline as a kubeconfig holds it (the client library writes it to a file)."""
    import base64

    from tests.cluster.pki import make_ca

    return base64.b64encode(make_ca("login-test").cert_pem).decode()
