"""A loopback HTTP provider for tests: echoes requests and misbehaves on demand.

Run it as a process (`python -m tests.providers.echo_provider --port N [--host 127.0.0.1]`) or in-process
with `with running_echo_provider() as provider: provider.url`. It listens on loopback only; with
`tls=(cert_file, key_file)` it serves https (for private-CA tests).

Routes (any method unless noted):
- `/echo/...`                 200 JSON {method, path, raw_path, query, query_pairs, headers, body, form, json}
- `/redirect?to=LOC&status=302`  a redirect to LOC (a path: same origin; an absolute URL: another origin)
- `/loop`                     302 to itself, forever
- `/garbled`                  200 claiming gzip content that is not gzip
- `/status/CODE?retry_after=V&body=TEXT&content_type=CT`  that status, optional Retry-After, body TEXT
                              (or a JSON error), optionally with that Content-Type (and its charset)
- `/flaky/KEY?fail=N&status=429&retry_after=V`  the first N hits on KEY fail with that status, then echo
- `/hits/KEY`                 GET: {"hits": n} for a flaky KEY (how many requests reached it)
- `/leak/CODE`                that status with an error body quoting every credential the request carried
                              (Authorization, X-Api-Key-like headers, cookies, query string, path)
- `/slow?delay=S&chunks=N`    headers at once, then N chunks of JSON-ish text, S seconds apart
- `/stall?delay=S`            waits S seconds before sending anything
- `/endless`                  200 text that never ends (stops when the client goes, or after 120 s)
- `/big?size=N&type=json|text`  a body of N bytes
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import uvicorn

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_ENDLESS_LIMIT_S = 120.0  # a client that never hangs up must not keep the provider busy forever
_LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass
class EchoProviderApp:
    """The ASGI app. State (flaky counters) lives on the instance, so each provider starts clean."""

    hits: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body = await _read_body(receive)
        path: str = scope["path"]
        query = dict(parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True))
        head, _, rest = path.lstrip("/").partition("/")
        handler = {
            "echo": self._echo,
            "redirect": self._redirect,
            "loop": self._loop,
            "garbled": self._garbled,
            "status": self._status,
            "flaky": self._flaky,
            "hits": self._hits,
            "leak": self._leak,
            "slow": self._slow,
            "stall": self._stall,
            "endless": self._endless,
            "big": self._big,
        }.get(head)
        if handler is None:
            await _respond(send, 404, {"error": f"no route {path}"})
            return
        await handler(scope=scope, send=send, body=body, query=query, rest=rest, receive=receive)

    async def _echo(self, *, scope: Scope, send: Send, body: bytes, **_: Any) -> None:
        await _respond(send, 200, echo_document(scope, body))

    async def _redirect(self, *, send: Send, query: dict[str, str], **_: Any) -> None:
        status = int(query.get("status", "302"))
        await _respond(send, status, b"", headers=[(b"location", query.get("to", "/echo/").encode())])

    async def _garbled(self, *, send: Send, **_: Any) -> None:
        body = b"this is not gzip"
        headers = [(b"content-encoding", b"gzip")]
        await _respond(send, 200, body, headers=headers, content_type=b"application/json")

    async def _loop(self, *, send: Send, **_: Any) -> None:
        await _respond(send, 302, b"", headers=[(b"location", b"/loop")])

    async def _status(self, *, send: Send, query: dict[str, str], rest: str, **_: Any) -> None:
        code = int(rest.split("/")[0] or "500")
        headers = []
        if "retry_after" in query:
            headers.append((b"retry-after", query["retry_after"].encode()))
        payload: Any = query.get("body", {"error": {"code": code, "message": "as asked"}})
        if "content_type" in query:  # body sent as bytes in that charset (latin-1 when it is not UTF-8)
            charset = query["content_type"].rpartition("charset=")[2].lower()
            payload = str(payload).encode(
                "utf-8" if charset in ("", "utf-8") else "latin-1", errors="replace"
            )
            await _respond(send, code, payload, headers=headers, content_type=query["content_type"].encode())
            return
        await _respond(send, code, payload, headers=headers)

    async def _flaky(
        self, *, scope: Scope, send: Send, body: bytes, query: dict[str, str], rest: str, **_: Any
    ) -> None:
        with self.lock:
            self.hits[rest] = seen = self.hits.get(rest, 0) + 1
        if seen <= int(query.get("fail", "1")):
            headers = []
            if "retry_after" in query:
                headers.append((b"retry-after", query["retry_after"].encode()))
            await _respond(send, int(query.get("status", "503")), {"error": "try later"}, headers=headers)
            return
        await _respond(send, 200, {**echo_document(scope, body), "hits": seen})

    async def _hits(self, *, send: Send, rest: str, **_: Any) -> None:
        with self.lock:
            seen = self.hits.get(rest, 0)
        await _respond(send, 200, {"hits": seen})

    async def _leak(self, *, scope: Scope, send: Send, body: bytes, rest: str, **_: Any) -> None:
        doc = echo_document(scope, body)
        quoted = " ".join(f"{k}={v}" for k, v in doc["headers"].items() if k not in ("host", "user-agent"))
        message = (
            f"invalid credentials: {quoted} path={doc['path']} query={doc['query']} "
            f"see https://provider.invalid/docs?{doc['query']}\x1b[31m\x00"
        )
        await _respond(send, int(rest or "401"), {"error": {"message": message}})

    async def _slow(self, *, send: Send, query: dict[str, str], **_: Any) -> None:
        delay, chunks = float(query.get("delay", "0.5")), int(query.get("chunks", "5"))
        await _start(send, 200, b"text/plain")
        for index in range(chunks):
            await asyncio.sleep(delay)
            await send({"type": "http.response.body", "body": f"chunk {index}\n".encode(), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _stall(self, *, send: Send, query: dict[str, str], **_: Any) -> None:
        await asyncio.sleep(float(query.get("delay", "5")))
        await _respond(send, 200, {"stalled": True})

    async def _endless(self, *, send: Send, receive: Receive, **_: Any) -> None:
        await _start(send, 200, b"text/plain")
        chunk = b"x" * 16384
        deadline = time.monotonic() + _ENDLESS_LIMIT_S
        # uvicorn drops sends after a disconnect silently, so watch for the disconnect message instead.
        gone = asyncio.ensure_future(receive())
        try:
            while time.monotonic() < deadline and not gone.done():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await asyncio.sleep(0)
        finally:
            gone.cancel()
        with contextlib.suppress(Exception):
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _big(self, *, send: Send, query: dict[str, str], **_: Any) -> None:
        size = int(query.get("size", "300000"))
        if query.get("type") == "json":
            payload = json.dumps({"data": "y" * max(0, size - 12)}).encode()
            await _respond(send, 200, payload, content_type=b"application/json")
        else:
            await _respond(send, 200, b"z" * size, content_type=b"text/plain")


def echo_document(scope: Scope, body: bytes) -> dict[str, Any]:
    """What /echo answers: everything the request carried, decoded as far as is unambiguous."""
    raw_query = scope["query_string"].decode("latin-1")
    headers: dict[str, str] = {}
    for key, value in scope["headers"]:
        name = key.decode("latin-1").lower()
        headers[name] = f"{headers[name]}, {value.decode('latin-1')}" if name in headers else value.decode()
    text = body.decode("utf-8", errors="replace")
    content_type = headers.get("content-type", "")
    form = parse_qsl(text, keep_blank_values=True) if "x-www-form-urlencoded" in content_type else None
    parsed_json = None
    if "json" in content_type and text:
        with contextlib.suppress(ValueError):
            parsed_json = json.loads(text)
    raw_path = scope.get("raw_path") or scope["path"].encode()
    return {
        "method": scope["method"],
        "path": scope["path"],
        "raw_path": raw_path.decode("latin-1"),
        "query": raw_query,
        "query_pairs": [list(p) for p in parse_qsl(raw_query, keep_blank_values=True)],
        "headers": headers,
        "body": text,
        "form": [list(p) for p in form] if form is not None else None,
        "json": parsed_json,
    }


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _start(
    send: Send, status: int, content_type: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type), *(headers or [])],
        }
    )


async def _respond(
    send: Send,
    status: int,
    payload: Any,
    *,
    headers: list[tuple[bytes, bytes]] | None = None,
    content_type: bytes | None = None,
) -> None:
    if isinstance(payload, bytes):
        body, kind = payload, content_type or b"text/plain; charset=utf-8"
    elif isinstance(payload, str):
        body, kind = payload.encode(), content_type or b"text/plain; charset=utf-8"
    else:
        body, kind = json.dumps(payload).encode(), content_type or b"application/json"
    all_headers = [(b"content-length", str(len(body)).encode()), *(headers or [])]
    await _start(send, status, kind, all_headers)
    await send({"type": "http.response.body", "body": body, "more_body": False})


@dataclass
class RunningProvider:
    """A provider serving in a background thread of this process."""

    host: str
    port: int
    app: EchoProviderApp
    server: uvicorn.Server
    thread: threading.Thread
    scheme: str = "http"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def item_api_document() -> dict[str, Any]:
    """An OpenAPI 3.0 document for this provider's `GET /echo/items/{itemId}` (bearer auth), to compile."""
    return {
        "openapi": "3.0.3",
        "info": {"title": "Echo provider", "version": "1"},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": {
            "/echo/items/{itemId}": {
                "get": {
                    "operationId": "getItem",
                    "parameters": [
                        {"name": "itemId", "in": "path", "required": True, "schema": {"type": "string"}},
                        {"name": "expand", "in": "query", "schema": {"type": "string"}},
                    ],
                    "responses": {"200": {"description": "the request as the provider saw it"}},
                }
            }
        },
    }


def start_echo_provider(
    *, host: str = "127.0.0.1", port: int = 0, tls: tuple[str, str] | None = None
) -> RunningProvider:
    """Start serving in a daemon thread and return once the socket accepts connections.

    `tls` is (certificate file, key file) in PEM: the provider then serves https.
    """
    if host not in _LOOPBACK:
        raise ValueError(f"host {host!r}: the echo provider listens on loopback only (127.0.0.1 or ::1)")
    app = EchoProviderApp()
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        loop="asyncio",
        timeout_graceful_shutdown=2,
        ssl_certfile=tls[0] if tls else None,
        ssl_keyfile=tls[1] if tls else None,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"echo-provider-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"echo provider did not start on {host}:{port}")
        time.sleep(0.01)
    bound_port = port or server.servers[0].sockets[0].getsockname()[1]
    return RunningProvider(
        host=host,
        port=bound_port,
        app=app,
        server=server,
        thread=thread,
        scheme="https" if tls else "http",
    )


@contextlib.contextmanager
def running_echo_provider(
    *, host: str = "127.0.0.1", port: int = 0, tls: tuple[str, str] | None = None
) -> Iterator[RunningProvider]:
    """`with running_echo_provider() as provider:` serve for the block, then stop."""
    provider = start_echo_provider(host=host, port=port, tls=tls)
    try:
        yield provider
    finally:
        provider.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Loopback echo provider for tests")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1", choices=_LOOPBACK)
    args = parser.parse_args(argv)
    uvicorn.run(EchoProviderApp(), host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
