"""A scripted stand-in for the Orchestration Engine on loopback, for the AER's and OEClient's HTTP tests.

It speaks the OE's routes (`/tool/execute`, `/tool/result`, `/executor/callback`) with the wire models of
`agent_runtime.protocol`: local tools are routed back to the AER, model calls are answered from a script
of AI messages, other tools echo. A test can force the next answers of a route (a status and a raw body)
to see how the client copes. Every request is recorded with its Authorization header.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from agent_runtime.protocol import (
    AGENT_SUSPEND,
    INVOKE_LLM,
    OE_CALLBACK_PATH,
    OE_TOOL_EXECUTE_PATH,
    OE_TOOL_RESULT_PATH,
    ExecutorCallback,
    ToolExecuteAnswer,
    ToolExecuteRequest,
    ToolResultRequest,
)

Scope = dict[str, Any]


@dataclass
class Recorded:
    path: str
    authorization: str | None
    body: dict[str, Any]


@dataclass
class FakeOEApp:
    local_tools: set[str] = field(default_factory=set)
    model_answers: deque[dict[str, Any]] = field(default_factory=deque)
    forced: dict[str, deque[tuple[int, bytes]]] = field(default_factory=dict)
    delay_s: dict[str, float] = field(default_factory=dict)  # before answering a route
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def force(self, path: str, *answers: tuple[int, bytes]) -> None:
        """The next requests to `path` get these (status, body) answers, in order."""
        with self.lock:
            self.forced.setdefault(path, deque()).extend(answers)

    def of(self, path: str) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if r.path == path]

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"]
        headers = dict(scope["headers"])
        authorization = headers.get(b"authorization", b"").decode() or None
        with self.lock:
            self.requests.append(Recorded(path, authorization, json.loads(body or b"{}")))
            queue = self.forced.get(path)
            forced = queue.popleft() if queue else None
        await asyncio.sleep(self.delay_s.get(path, 0.0))
        if forced is not None:
            await _respond(send, status=forced[0], body=forced[1])
            return
        if path == OE_TOOL_EXECUTE_PATH:
            answer = self._answer(ToolExecuteRequest.model_validate_json(body))
            await _respond(send, status=200, body=answer.model_dump_json().encode())
        elif path == OE_TOOL_RESULT_PATH:
            ToolResultRequest.model_validate_json(body)
            await _respond(send, status=200, body=b'{"accepted":true}')
        elif path == OE_CALLBACK_PATH:
            ExecutorCallback.model_validate_json(body)
            await _respond(send, status=200, body=b'{"accepted":true}')
        else:
            await _respond(send, status=404, body=b'{"detail":"no such route"}')

    def _answer(self, request: ToolExecuteRequest) -> ToolExecuteAnswer:
        if request.tool == INVOKE_LLM:
            with self.lock:
                message = self.model_answers.popleft()
            return ToolExecuteAnswer(step=request.step, proceed=True, status="success", result=message)
        if request.tool in self.local_tools:
            return ToolExecuteAnswer(step=request.step, proceed=True, route_to="callback")
        if request.tool == AGENT_SUSPEND:
            # The real OE holds an agent-level suspension at its step and answers `suspend` with what it asks.
            return ToolExecuteAnswer(step=request.step, proceed=True, status="suspend", result=request.args)
        result = {"tool": request.tool, "args": request.args}
        return ToolExecuteAnswer(step=request.step, proceed=True, status="success", result=result)


async def _respond(send: Any, *, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@dataclass
class RunningFakeOE:
    app: FakeOEApp
    server: uvicorn.Server
    thread: threading.Thread
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def callbacks(self) -> list[dict[str, Any]]:
        return [r.body for r in self.app.of(OE_CALLBACK_PATH)]

    def wait_for_callbacks(self, count: int, *, timeout: float = 20) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.callbacks()) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.callbacks())} callback(s) after {timeout}s, expected {count}")
            time.sleep(0.02)
        return self.callbacks()


@contextlib.contextmanager
def running_fake_oe(
    *, local_tools: Iterable[str] = (), model_answers: Iterable[dict[str, Any]] = ()
) -> Iterator[RunningFakeOE]:
    """Serve a fake OE on 127.0.0.1 in a daemon thread for the block."""
    app = FakeOEApp(local_tools=set(local_tools), model_answers=deque(model_answers))
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", access_log=False, lifespan="on", loop="asyncio"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="fake-oe", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the fake OE did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield RunningFakeOE(app=app, server=server, thread=thread, port=port)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def ai_message(content: str = "", *, calls: Iterable[tuple[str, str, dict[str, Any]]] = ()) -> dict[str, Any]:
    """An AI message as the Tool Pod's model returns it; calls are (id, name, args)."""
    return {
        "type": "ai",
        "content": content,
        "id": None,
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {},
        "tool_calls": [{"id": i, "name": n, "args": a} for i, n, a in calls],
        "usage_metadata": None,
    }
