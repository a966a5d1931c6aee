"""A loopback provider that echoes every request, whole and in every encoding, in 200 and error answers.

The worst careless provider there is: a debug endpoint (or an error page) that quotes the request line, the
headers, the query string and the body, and the raw request again as hex, base64 (standard and URL-safe),
URL-encoded and form-encoded text, and once as a JSON object key. Credentials a connector sends therefore
come back in every form the Tool Pod must redact. Real HTTP on 127.0.0.1 only.

- any path containing `/fail/CODE/` (or ending in `/fail/CODE`): status CODE (401 when not a number), a JSON
  error `{"error": {"message": <the credential-bearing parts, raw and encoded>}, "request": <the echo>}`;
- any other path: 200 with the echo as JSON.

`with running_canary_echo() as echo:` serves for the block; `echo.requests` records what came in.
`with running_echo_smtp() as (host, port):` is the same for SMTP (aiosmtpd): it accepts any AUTH and then
refuses the message with a 554 that quotes the password raw, as AUTH PLAIN's base64 and as hex.
`with running_echo_postgres() as (host, port):` speaks just enough of PostgreSQL's protocol to ask for the
password in clear text and refuse the login with an error quoting it (raw, base64, hex).
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus

import uvicorn

from tests.conftest import free_port

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def echo_of(scope: Scope, body: bytes) -> dict[str, Any]:
    """Everything the request carried, as text and in every encoding."""
    raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    query = scope["query_string"].decode("latin-1")
    line = f"{scope['method']} {raw_path}{'?' + query if query else ''} HTTP/1.1"
    headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]]
    head = "\r\n".join([line, *(f"{k}: {v}" for k, v in headers)])
    raw = f"{head}\r\n\r\n".encode("latin-1") + body
    return {
        "request_line": line,
        "headers": headers,
        "query": query,
        "body": body.decode("utf-8", errors="replace"),
        "as_key": {head: True},
        "dump": {
            "hex": raw.hex(),
            "base64": base64.b64encode(raw).decode(),
            "base64url": base64.urlsafe_b64encode(raw).decode().rstrip("="),
            "urlencoded": quote(raw, safe=""),
            "form": quote_plus(raw, safe="/"),
        },
    }


_PLAIN_HEADERS = frozenset(
    {"host", "user-agent", "accept", "accept-encoding", "content-length", "connection"}
)


def careless_message(echo: dict[str, Any]) -> str:
    """An error message that quotes what carried the credential first (clients cut messages short): the
    headers, query and body, then the same text URL-encoded, base64-encoded and hex-encoded."""
    quoted = " ".join(f"{k}={v}" for k, v in echo["headers"] if k not in _PLAIN_HEADERS)
    quoted += f" query={echo['query']} body={echo['body'][:200]}"
    data = quoted.encode()
    return (
        f"invalid credentials: {quoted} url={quote(quoted, safe='')} "
        f"b64={base64.b64encode(data).decode()} hex={data.hex()}"
    )


@dataclass
class CanaryEchoApp:
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        echo = echo_of(scope, b"".join(chunks))
        self.requests.append(echo)
        status, payload = 200, echo
        parts = scope["path"].split("/")
        if "fail" in parts:
            code = parts[parts.index("fail") + 1] if parts.index("fail") + 1 < len(parts) else ""
            status = int(code) if code.isdigit() and 400 <= int(code) <= 599 else 401
            payload = {"error": {"message": careless_message(echo)}, "request": echo}
        data = json.dumps(payload).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})


@dataclass
class RunningCanaryEcho:
    url: str
    app: CanaryEchoApp

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.app.requests


@contextlib.contextmanager
def running_canary_echo() -> Iterator[RunningCanaryEcho]:
    """Serve on a free loopback port in a thread for the block."""
    app = CanaryEchoApp()
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="canary-echo", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the canary echo provider did not start")
        time.sleep(0.02)
    try:
        yield RunningCanaryEcho(url=f"http://127.0.0.1:{port}", app=app)
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.contextmanager
def running_echo_smtp() -> Iterator[tuple[str, int]]:
    """An SMTP server on loopback whose refusal of DATA quotes the credential the session logged in with."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    logins: dict[int, tuple[bytes, bytes]] = {}

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            login, password = logins.get(id(session), (b"", b""))
            plain = base64.b64encode(b"\0" + login + b"\0" + password).decode()
            quoted = f"password={password.decode()} auth={plain} hex={password.hex()}"
            return f"554 5.7.1 rejected for {login.decode()} {quoted}"

    def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
        if isinstance(auth_data, LoginPassword):
            logins[id(session)] = (auth_data.login, auth_data.password)
        return AuthResult(success=True)

    port = free_port()
    controller = Controller(
        Handler(),
        hostname="127.0.0.1",
        port=port,
        authenticator=authenticator,
        auth_required=True,
        auth_require_tls=False,  # loopback only
    )
    controller.start()
    try:
        yield "127.0.0.1", port
    finally:
        controller.stop()


def _pg_read(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the client went away")
        data += chunk
    return data


def _pg_session(conn: socket.socket) -> None:
    with conn:
        while True:  # SSL and GSS encryption requests are declined with 'N', then comes the startup
            length = struct.unpack("!i", _pg_read(conn, 4))[0]
            payload = _pg_read(conn, length - 4)
            if struct.unpack("!i", payload[:4])[0] in (80877103, 80877104):
                conn.sendall(b"N")
                continue
            break
        conn.sendall(b"R" + struct.pack("!ii", 8, 3))  # AuthenticationCleartextPassword
        _kind, length = struct.unpack("!ci", _pg_read(conn, 5))
        password = _pg_read(conn, length - 4).rstrip(b"\0")
        message = (
            f"login refused: password={password.decode()} b64={base64.b64encode(password).decode()} "
            f"hex={password.hex()}"
        ).encode()
        fields = b"SERROR\0VERROR\0CXX000\0M" + message + b"\0\0"
        conn.sendall(b"E" + struct.pack("!i", len(fields) + 4) + fields)


@contextlib.contextmanager
def running_echo_postgres() -> Iterator[tuple[str, int]]:
    """A fake PostgreSQL server on loopback that quotes the password it was sent in its login error."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(5)
            threading.Thread(target=_pg_session_quiet, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, name="echo-postgres", daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def _pg_session_quiet(conn: socket.socket) -> None:
    with contextlib.suppress(OSError, ConnectionError, struct.error):
        _pg_session(conn)
