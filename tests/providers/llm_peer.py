"""A loopback LLM peer for tests: speaks OpenAI's chat-completions wire format, scripted per test.

Run it in-process (`with running_llm_peer(script=[...], api_key=K) as peer: peer.base_url`) or as a
process (`python -m tests.providers.llm_peer --port N [--host 127.0.0.1] [--api-key K] [--script F]`,
F a JSON list of turns). It listens on loopback only.

Routes:
- `POST /v1/chat/completions`  JSON, or server-sent events with `stream: true` (OpenAI's chunk format:
  a role chunk, content and tool-call argument deltas split across chunks, a finish chunk, a usage chunk
  when `stream_options.include_usage`, then `data: [DONE]`).
- `GET /v1/models`             the models list (one entry: whatever was last asked for, or `peer-model`).

With `api_key` set, a request without `Authorization: Bearer <key>` gets 401 in OpenAI's error shape.
Error bodies quote the credential the request carried, as careless providers do, so tests can prove a
client never repeats a body. Every request is recorded (`peer.requests`), unauthorized ones included.

Each completion request takes the next scripted `Turn`: a text answer, tool calls, an HTTP error, a raw
(garbage) body, a delay, or a stream dropped part-way. With the script empty, or for a turn that names
no answer, a deterministic "agent brain" answers: offered tools and a human message last -> it calls the
first tool whose schema has a single string property with the human text; tool messages last -> a text
quoting each result (`word_count says: {...}`); otherwise `peer heard: <text>`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from pydantic import BaseModel, ConfigDict, Field

# The wire format, the brain and the completion rendering are the product's offline model stand-in's
# (`agentengine dev --model scripted`); this peer adds the faults, the recording and the key check.
from agent_runtime.devloop.scripted_model import (
    Completion,
    ScriptedCall,
    request_problem,
)
from agent_runtime.devloop.scripted_model import (
    brain as scripted_brain,
)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")
COMPLETIONS_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
SYSTEM_FINGERPRINT = "fp_llmpeer01"


class Turn(BaseModel):
    """What the peer does for one completion request; a turn naming no answer lets the brain answer."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    tool_calls: list[ScriptedCall] | None = None
    status: int | None = Field(default=None, ge=400, le=599)  # an HTTP error in OpenAI's shape
    retry_after: float | None = None
    raw: str | None = None  # a 200 carrying exactly this body (garbage, wrong shape, broken SSE)
    content_type: str = "application/json"  # of `raw`
    delay_s: float = 0.0  # before the response starts
    chunk_delay_s: float = 0.0  # between stream chunks
    # Streaming on demand: the last chunk waits until this file exists (a test then knows the stream is
    # not over), and a client hanging up mid-stream is written down in `gone_file`.
    hold_last_until: str | None = None
    gone_file: str | None = None
    drop_after: int | None = Field(default=None, ge=0)  # stream chunks sent before the peer gives up
    abort: bool = True  # a drop resets the connection; False ends the body cleanly without [DONE]
    id: str | None = None  # the completion id; by default a digest of the request and the turn

    @classmethod
    def answer(cls, text: str, **more: Any) -> Turn:
        return cls(text=text, **more)

    @classmethod
    def calls(cls, *calls: tuple[str, Mapping[str, Any]], text: str | None = None, **more: Any) -> Turn:
        return cls(tool_calls=[ScriptedCall(name=n, args=dict(a)) for n, a in calls], text=text, **more)

    @classmethod
    def error(cls, status: int, *, retry_after: float | None = None) -> Turn:
        return cls(status=status, retry_after=retry_after)

    @classmethod
    def garbage(cls, body: str = "<html>502 Bad Gateway</html>", *, content_type: str = "text/html") -> Turn:
        return cls(raw=body, content_type=content_type)

    @classmethod
    def slow(cls, delay_s: float, *, text: str | None = None) -> Turn:
        return cls(delay_s=delay_s, text=text)

    @classmethod
    def dropped(cls, after_chunks: int = 1, *, abort: bool = True, text: str | None = None) -> Turn:
        return cls(drop_after=after_chunks, abort=abort, text=text)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the peer received it."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any  # the parsed JSON body; None when it was not JSON
    client: tuple[str, int] | None = None  # the caller's address: equal ports mean a reused connection

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")


class _PeerDrop(Exception):
    """Raised inside the app to make uvicorn reset a connection mid-response."""


class _QuietDrops(logging.Filter):
    """uvicorn logs an app exception as an error; an intended drop is not one."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], _PeerDrop))


@dataclass
class LLMPeerApp:
    """The ASGI app. The script and the request log live on the instance; tests push from another thread."""

    api_key: str | None = None
    script: deque[Turn] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_model: str = "peer-model"

    def push(self, *turns: Turn | Mapping[str, Any]) -> None:
        with self.lock:
            self.script.extend(t if isinstance(t, Turn) else Turn.model_validate(t) for t in turns)

    def _next_turn(self) -> Turn:
        with self.lock:
            return self.script.popleft() if self.script else Turn()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body = await _read_body(receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        parsed: Any = None
        with contextlib.suppress(ValueError):
            parsed = json.loads(body) if body else None
        with self.lock:
            client = tuple(scope["client"]) if scope.get("client") else None
            self.requests.append(
                RecordedRequest(scope["method"], scope["path"], headers, body, parsed, client)
            )
        got = headers.get("authorization", "")
        if self.api_key is not None and got != f"Bearer {self.api_key}":
            shown = got.removeprefix("Bearer ") or "(none)"
            await _error(send, 401, f"Incorrect API key provided: {shown}.", code="invalid_api_key")
            return
        route = (scope["method"], scope["path"].rstrip("/"))
        if route == ("GET", MODELS_PATH):
            model = {"id": self.last_model, "object": "model", "created": 0, "owned_by": "llm-peer"}
            await _respond(send, 200, {"object": "list", "data": [model]})
        elif route == ("POST", COMPLETIONS_PATH):
            await self._complete(parsed, headers=headers, receive=receive, send=send)
        else:
            await _error(send, 404, f"Unknown request URL: {route[0]} {route[1]}.", code="unknown_url")

    async def _complete(
        self, request: Any, *, headers: Mapping[str, str], receive: Receive, send: Send
    ) -> None:
        problem = request_problem(request)
        if problem:
            await _error(send, 400, problem, code="invalid_request")
            return
        self.last_model = request["model"]
        turn = self._next_turn()
        if turn.delay_s and not await _sleep_unless_gone(receive, turn.delay_s):
            return
        if turn.status is not None:
            # Quote the credential in the message, as some providers do.
            extra = (
                [(b"retry-after", f"{turn.retry_after:g}".encode())] if turn.retry_after is not None else []
            )
            message = f"Scripted error for key {headers.get('authorization', '')!r}"
            await _error(send, turn.status, message, code=f"scripted_{turn.status}", headers=extra)
            return
        if turn.raw is not None:
            await _respond(send, 200, turn.raw.encode(), content_type=turn.content_type.encode())
            return
        completion = _completion(request, turn)
        if request.get("stream"):
            include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
            await _stream(send, receive, completion.chunks(include_usage=include_usage), turn)
        elif turn.drop_after is not None:  # a whole response cut in half
            payload = json.dumps(completion.whole()).encode()
            await _start(send, 200, b"application/json", [(b"content-length", str(len(payload)).encode())])
            await send(
                {"type": "http.response.body", "body": payload[: len(payload) // 2], "more_body": True}
            )
            raise _PeerDrop
        else:
            await _respond(send, 200, completion.whole())


def brain(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> tuple[str, list[ScriptedCall]]:
    """The product's deterministic brain, in this peer's words (`peer heard: ...`)."""
    return scripted_brain(messages, tools, heard="peer heard")


def _completion(request: dict[str, Any], turn: Turn) -> Completion:
    """The turn's answer (the brain's when it names none), with an id from the request and the turn."""
    text, scripted = turn.text, turn.tool_calls
    if text is None and scripted is None:
        text, scripted = brain(request["messages"], request.get("tools"))
    return Completion.build(
        request,
        text=text or "",
        calls=scripted or [],
        seed=turn.model_dump(include={"text", "tool_calls", "id"}),
        completion_id=turn.id,
        fingerprint=SYSTEM_FINGERPRINT,
    )


# ASGI plumbing ------------------------------------------------------------------------------------------


async def _stream(send: Send, receive: Receive, chunks: list[dict[str, Any]], turn: Turn) -> None:
    await _start(send, 200, b"text/event-stream; charset=utf-8", [(b"cache-control", b"no-cache")])
    for index, chunk in enumerate(chunks):
        if turn.drop_after is not None and index >= turn.drop_after:
            if turn.abort:
                raise _PeerDrop
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if index and turn.chunk_delay_s and not await _sleep_unless_gone(receive, turn.chunk_delay_s):
            _note_gone(turn, index)
            return
        if index == len(chunks) - 1 and turn.hold_last_until and not await _held(receive, turn):
            _note_gone(turn, index)
            return
        await send({"type": "http.response.body", "body": _event(json.dumps(chunk)), "more_body": True})
    await send({"type": "http.response.body", "body": _event("[DONE]"), "more_body": False})


async def _held(receive: Receive, turn: Turn) -> bool:
    """Wait for the turn's release file; False when the client hangs up first."""
    assert turn.hold_last_until is not None
    release = Path(turn.hold_last_until)
    while not release.exists():  # noqa: ASYNC240 - a tiny local check, polled
        if not await _sleep_unless_gone(receive, 0.01):
            return False
    return True


def _note_gone(turn: Turn, index: int) -> None:
    if turn.gone_file:
        Path(turn.gone_file).write_text(f"{index}\n", encoding="utf-8")


def _event(data: str) -> bytes:
    return f"data: {data}\n\n".encode()


async def _sleep_unless_gone(receive: Receive, seconds: float) -> bool:
    """Sleep; False as soon as the client hangs up (the body was read, so receive() waits for that)."""
    gone = asyncio.ensure_future(receive())
    try:
        await asyncio.wait({gone}, timeout=seconds)
        return not gone.done()
    finally:
        gone.cancel()


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


async def _start(send: Send, status: int, content_type: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type), *headers],
        }
    )


async def _respond(
    send: Send, status: int, payload: Any, *, content_type: bytes = b"application/json"
) -> None:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    await _start(send, status, content_type, [(b"content-length", str(len(body)).encode())])
    await send({"type": "http.response.body", "body": body, "more_body": False})


_ERROR_TYPES = {401: "invalid_request_error", 404: "invalid_request_error", 429: "rate_limit_exceeded"}


async def _error(
    send: Send, status: int, message: str, *, code: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """OpenAI's error body: `{"error": {"message", "type", "param", "code"}}`."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()
    await _start(
        send, status, b"application/json", [(b"content-length", str(len(body)).encode()), *(headers or [])]
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


# Running it ---------------------------------------------------------------------------------------------


@dataclass
class RunningLLMPeer:
    """A peer serving in a background thread of this process."""

    host: str
    port: int
    app: LLMPeerApp
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def url(self) -> str:
        """The origin, `http://127.0.0.1:PORT`."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client is configured with: the origin plus `/v1`."""
        return f"{self.url}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self.app.lock:
            return list(self.app.requests)

    @property
    def pending(self) -> int:
        """Scripted turns not yet used."""
        with self.app.lock:
            return len(self.app.script)

    def push(self, *turns: Turn | Mapping[str, Any]) -> None:
        self.app.push(*turns)

    def reset(self) -> None:
        """Forget the script and the recorded requests (a shared peer between tests)."""
        with self.app.lock:
            self.app.script.clear()
            self.app.requests.clear()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def _quiet_uvicorn() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietDrops) for f in logger.filters):
        logger.addFilter(_QuietDrops())


def start_llm_peer(
    *,
    script: Iterable[Turn | Mapping[str, Any]] = (),
    api_key: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
) -> RunningLLMPeer:
    """Start serving in a daemon thread and return once the socket accepts connections."""
    if host not in _LOOPBACK:
        raise ValueError(f"host {host!r}: the LLM peer listens on loopback only (127.0.0.1 or ::1)")
    app = LLMPeerApp(api_key=api_key)
    app.push(*script)
    _quiet_uvicorn()
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        loop="asyncio",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"llm-peer-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"LLM peer did not start on {host}:{port}")
        time.sleep(0.01)
    bound_port = port or server.servers[0].sockets[0].getsockname()[1]
    return RunningLLMPeer(host=host, port=bound_port, app=app, server=server, thread=thread)


@contextlib.contextmanager
def running_llm_peer(
    *,
    script: Iterable[Turn | Mapping[str, Any]] = (),
    api_key: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
) -> Iterator[RunningLLMPeer]:
    """`with running_llm_peer(script=[...], api_key=K) as peer:` serve for the block, then stop."""
    peer = start_llm_peer(script=script, api_key=api_key, host=host, port=port)
    try:
        yield peer
    finally:
        peer.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Loopback OpenAI chat-completions peer for tests")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1", choices=_LOOPBACK)
    parser.add_argument("--api-key", default=None, help="require `Authorization: Bearer KEY`")
    parser.add_argument("--script", type=Path, default=None, help="a JSON list of turns")
    args = parser.parse_args(argv)
    app = LLMPeerApp(api_key=args.api_key)
    if args.script is not None:
        app.push(*json.loads(args.script.read_text()))
    _quiet_uvicorn()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
