"""The operator's API connection against real loopback servers: TLS with a client certificate, what each
verb sends, request slots, watches, and a transport failure as `ApiUnreachable` (status 0, no credential).

Inline client credentials from a kubeconfig leave no file behind.
"""

from __future__ import annotations

import asyncio
import base64
import http.server
import json
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agent_operator.kube import ApiError, ApiUnreachable, Connection, KubeApi
from tests.cluster.pki import issue, make_ca, write_pair

TOKEN = "kube-connection-token-7f6e"
BIG = "x" * 300_000  # one watch line longer than aiohttp's own line limit (128 KiB)


def test_inline_client_certificate_and_key_files_are_removed_once_loaded() -> None:
    pair = make_ca("operator-client")
    info = SimpleNamespace(
        server="https://127.0.0.1:6443/",
        ca_data=base64.b64encode(pair.cert_pem).decode(),
        ca_path=None,
        certificate_data=base64.b64encode(pair.cert_pem).decode(),
        certificate_path=None,
        private_key_data=base64.b64encode(pair.key_pem).decode(),
        private_key_path=None,
        token=None,
        insecure=False,
    )
    connection = Connection.from_kopf(info)
    assert len(connection.temp_files) == 2
    assert all(os.path.exists(path) for path in connection.temp_files)
    api = KubeApi(connection)
    assert not any(os.path.exists(path) for path in connection.temp_files)
    asyncio.run(api.aclose())


@dataclass
class Seen:
    """What the loopback server received and how busy it was."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    active: int = 0
    peak: int = 0
    peers: set[int] = field(default_factory=set)  # client ports: one per connection
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Server:
    url: str
    seen: Seen


def _serve(tls: ssl.SSLContext | None = None) -> Iterator[Server]:
    seen = Seen()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies, as the API server

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path, _, query = self.path.partition("?")
            with seen.lock:
                seen.requests.append(
                    {
                        "method": self.command,
                        "path": path,
                        "query": query,
                        "content_type": self.headers.get("Content-Type"),
                        "accept": self.headers.get("Accept"),
                        "authorization": self.headers.get("Authorization"),
                        "body": body.decode(),
                    }
                )
                seen.peers.add(self.client_address[1])
                seen.active += 1
                seen.peak = max(seen.peak, seen.active)
            try:
                self._route(path, query)
            finally:
                with seen.lock:
                    seen.active -= 1

        def _route(self, path: str, query: str) -> None:
            if path.endswith("/drop"):
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
            elif path.endswith("/partial"):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "100")
                self.end_headers()
                self.wfile.write(b'{"kind":')
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
            elif path.endswith("/missing"):
                self._json(404, {"kind": "Status", "message": 'configmaps "missing" not found'})
            elif path.endswith("/taken") and self.command == "POST":
                self._json(409, {"kind": "Status", "message": "already exists"})
            elif path.endswith("/forbidden"):
                self._json(403, {"kind": "Status", "message": "configmaps is forbidden: no rights"})
            elif "watch=1" in query:
                self._watch(drop=path.endswith("/watch-drop"))
            elif path.endswith("/paged"):  # a LIST in two pages
                second = "continue=p2" in query
                meta = {"resourceVersion": "9"} if second else {"resourceVersion": "8", "continue": "p2"}
                self._json(200, {"kind": "List", "metadata": meta, "items": [{"n": 2 if second else 1}]})
            else:
                if path.endswith("/slow"):
                    time.sleep(0.05)
                self._json(200, {"kind": "Thing", "metadata": {"resourceVersion": "7"}, "items": [{"n": 1}]})

        def _json(self, status: int, document: dict[str, Any]) -> None:
            body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _watch(self, *, drop: bool) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            events = [
                {"type": "ADDED", "object": {"metadata": {"name": "a", "annotations": {"big": BIG}}}},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
            ]
            text = "".join(json.dumps(e) + "\n\n" for e in events)
            text += '{"type": "DELETED", "object": {"metadata": {"name": "a"}}}'  # no final newline
            if drop:
                text = json.dumps(events[1]) + "\n" + '{"type": "ADD'
            data = text.encode()
            for i in range(0, len(data), 7000):  # lines split over many chunks
                piece = data[i : i + 7000]
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
            if drop:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(b"0\r\n\r\n")

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            return

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    scheme = "https" if tls is not None else "http"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield Server(url=f"{scheme}://127.0.0.1:{httpd.server_address[1]}", seen=seen)
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    yield from _serve()


def _run(api: KubeApi, scenario: Any) -> Any:
    async def run() -> Any:
        try:
            return await scenario()
        finally:
            await api.aclose()

    return asyncio.run(run())


def test_each_verb_sends_what_the_api_server_expects_and_is_counted(server: Server) -> None:
    api = KubeApi(Connection(server=server.url, token=TOKEN))
    base = "/api/v1/namespaces/ns/configmaps"

    async def scenario() -> None:
        assert (await api.get(f"{base}/a"))["kind"] == "Thing"
        assert await api.get(f"{base}/missing") is None
        assert await api.list(base, label_selector="app.kubernetes.io/managed-by=agent-engine") == [{"n": 1}]
        await api.apply(f"{base}/a", {"kind": "ConfigMap"}, field_manager="agent-operator")
        assert await api.create(base, {"kind": "ConfigMap"}, field_manager="agent-operator") is not None
        assert await api.create(f"{base}/taken", {"kind": "ConfigMap"}, field_manager="fm") is None
        await api.update(f"{base}/a", {"kind": "ConfigMap"}, field_manager="agent-operator")
        await api.merge_patch(f"{base}/a/status", {"status": {}}, field_manager="agent-operator")
        assert await api.delete(f"{base}/a") is True
        assert await api.delete(f"{base}/missing") is False
        assert await api.list_metadata(base) == ([{"n": 1}], "7")

    _run(api, scenario)
    sent = {(r["method"], r["path"], r["query"]): r for r in server.seen.requests}
    apply = sent[("PATCH", f"{base}/a", "fieldManager=agent-operator&force=true")]
    assert apply["content_type"] == "application/apply-patch+yaml" and json.loads(apply["body"]) == {
        "kind": "ConfigMap"
    }
    merge = sent[("PATCH", f"{base}/a/status", "fieldManager=agent-operator")]
    assert merge["content_type"] == "application/merge-patch+json"
    assert sent[("PUT", f"{base}/a", "fieldManager=agent-operator")]["content_type"] == "application/json"
    assert ("GET", base, "limit=100&labelSelector=app.kubernetes.io/managed-by%3Dagent-engine") in sent
    assert sent[("GET", base, "limit=100")]["accept"].startswith(
        "application/json;as=PartialObjectMetadataList"
    )
    assert all(r["authorization"] == f"Bearer {TOKEN}" for r in server.seen.requests)
    assert api.requests == {"GET": 4, "PATCH": 2, "POST": 2, "PUT": 1, "DELETE": 2}
    assert api.writes == 7


def test_errors_carry_the_status_message_and_a_transport_failure_is_unreachable(server: Server) -> None:
    api = KubeApi(Connection(server=server.url, token=TOKEN), timeout=5)
    base = "/api/v1/namespaces/ns/configmaps"

    async def scenario() -> list[ApiError]:
        failures = []
        for call in (
            api.get(f"{base}/forbidden"),
            api.get(f"{base}/drop"),
            api.apply(f"{base}/partial", {"data": {"secret": TOKEN}}, field_manager="fm"),
        ):
            with pytest.raises(ApiError) as caught:
                await call
            failures.append(caught.value)
        return failures

    forbidden, dropped, partial = _run(api, scenario)
    assert (forbidden.status, forbidden.message) == (403, "configmaps is forbidden: no rights")
    assert not isinstance(forbidden, ApiUnreachable)
    for failure, verb, path in ((dropped, "GET", f"{base}/drop"), (partial, "PATCH", f"{base}/partial")):
        assert isinstance(failure, ApiUnreachable) and failure.status == 0
        assert f"{verb} {path}" in failure.message and "Error" in failure.message, failure.message
        assert TOKEN not in str(failure) and failure.__cause__ is None and failure.__suppress_context__


def test_a_server_that_is_not_there_is_unreachable_without_the_token() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    api = KubeApi(Connection(server=f"http://127.0.0.1:{port}", token=TOKEN))
    path = "/api/v1/namespaces/ns/secrets/s"

    async def scenario() -> ApiError:
        with pytest.raises(ApiUnreachable) as caught:
            await api.get(path)
        return caught.value

    failure = _run(api, scenario)
    assert failure.status == 0 and str(failure).startswith("0: ")
    assert "ClientConnectorError" in failure.message and f"GET {path}" in failure.message
    assert TOKEN not in str(failure)


def test_requests_queue_for_their_slots_and_a_watch_holds_none(server: Server) -> None:
    api = KubeApi(Connection(server=server.url), max_connections=2)
    base = "/api/v1/namespaces/ns/configmaps"

    async def scenario() -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []

        async def follow() -> None:
            async for event in api.watch_metadata(f"{base}/watch", resource_version="1"):
                events.append(event)

        watching = asyncio.create_task(follow())
        answers = await asyncio.gather(*(api.get(f"{base}/slow") for _ in range(12)))
        assert all(answer is not None for answer in answers)
        await watching
        return events

    events = _run(api, scenario)
    assert len(events) == 3
    assert server.seen.peak <= 3  # two request slots and the watch's own connection
    # Keep-alive: twelve requests over at most two connections (the watch has its own).
    assert len(server.seen.peers) <= 3
    assert api.requests == {"GET": 12, "WATCH": 1}


def test_a_watch_yields_long_lines_split_over_chunks_and_a_last_line_without_newline(
    server: Server,
) -> None:
    api = KubeApi(Connection(server=server.url))

    async def scenario() -> list[dict[str, Any]]:
        return [e async for e in api.watch_metadata("/api/v1/configmaps/watch", resource_version="5")]

    events = _run(api, scenario)
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK", "DELETED"]
    assert events[0]["object"]["metadata"]["annotations"]["big"] == BIG
    watch = server.seen.requests[0]
    assert watch["accept"].startswith("application/json;as=PartialObjectMetadata;")
    assert "resourceVersion=5" in watch["query"] and "allowWatchBookmarks=true" in watch["query"]


def test_a_watch_cut_mid_line_is_unreachable_after_the_events_it_delivered(server: Server) -> None:
    api = KubeApi(Connection(server=server.url, token=TOKEN))
    path = "/api/v1/namespaces/ns/secrets/watch-drop"

    async def scenario() -> tuple[list[dict[str, Any]], ApiError]:
        events = []
        with pytest.raises(ApiUnreachable) as caught:
            async for event in api.watch_metadata(path, resource_version="1"):
                events.append(event)
        return events, caught.value

    events, failure = _run(api, scenario)
    assert [e["type"] for e in events] == ["BOOKMARK"]
    assert failure.status == 0 and f"WATCH {path}" in failure.message and TOKEN not in str(failure)


def test_tls_with_a_client_certificate_from_inline_kubeconfig_data(tmp_path: Path) -> None:
    ca = make_ca("kube-connection-ca")
    serving = issue(ca, common_name="apiserver", hosts=("127.0.0.1",), server=True)
    cert, key = write_pair(serving, tmp_path, "serving")
    ca_file, _ = write_pair(ca, tmp_path, "ca")
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    tls.verify_mode = ssl.CERT_REQUIRED  # no client certificate, no connection
    tls.load_verify_locations(ca_file)
    client = issue(ca, common_name="operator", client=True)
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    info = SimpleNamespace(
        ca_data=b64(ca.cert_pem),
        ca_path=None,
        certificate_data=b64(client.cert_pem),
        certificate_path=None,
        private_key_data=b64(client.key_pem),
        private_key_path=None,
        token=None,
        insecure=False,
    )
    other_ca = make_ca("someone-else")
    for running in _serve(tls):
        trusted = KubeApi(Connection.from_kopf(SimpleNamespace(**vars(info), server=running.url + "/")))
        assert _run(trusted, lambda api=trusted: api.get("/api/v1/namespaces/default")) is not None
        stranger = KubeApi(Connection(server=running.url, ca_pem=other_ca.cert_pem.decode()))

        async def refused(api: KubeApi = stranger) -> ApiError:
            with pytest.raises(ApiUnreachable) as caught:
                await api.get("/api/v1/namespaces/default")
            return caught.value

        failure = _run(stranger, refused)
        assert "Certificate" in failure.message, failure.message
    assert len(running.seen.requests) == 1


def test_a_large_list_comes_in_pages(server: Server) -> None:
    """LISTs ask for pages (limit) and follow `continue`: a big collection is never one body in memory."""
    api = KubeApi(Connection(server=server.url, token=TOKEN))
    path = "/api/v1/namespaces/ns/configmaps/paged"

    async def scenario() -> None:
        assert await api.list(path) == [{"n": 1}, {"n": 2}]
        pages = [(items, version) async for items, version in api.pages(path, limit=1)]
        assert pages == [([{"n": 1}], "8"), ([{"n": 2}], "9")]

    _run(api, scenario)
    queries = [r["query"] for r in server.seen.requests if r["path"] == path]
    assert queries == ["limit=100", "limit=100&continue=p2", "limit=1", "limit=1&continue=p2"]
    assert api.requests == {"GET": 4}
