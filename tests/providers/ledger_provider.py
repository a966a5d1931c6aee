"""A loopback provider that counts side effects, for the crash campaign (issue 14).

Every `POST /effects/{action}` is a side effect and must carry an `Idempotency-Key` header (400 without):
the provider records each one it receives, never deduplicates, and so counts a key seen twice as a
duplicated side effect. `GET /lookup/{item}` is a read. A test can hold a POST after it is recorded and
before it is answered (`provider.hold(action, order)`), which is the moment to kill a process: the effect
has happened and nobody upstream has heard of it yet.

    with running_ledger_provider() as provider:
        hold = provider.hold("charge", order)
        ...                      # something sends the charge
        hold.reached.wait(30)    # recorded, answer held
        ...                      # SIGKILL a process, restart it
        hold.release()
        provider.duplicates(order)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_HOLD_LIMIT_S = 120.0  # a hold nobody releases must not keep a request open forever


@dataclass(frozen=True)
class Effect:
    key: str  # the Idempotency-Key header
    action: str
    order: str
    at: float


@dataclass
class Hold:
    """One held POST: `reached` is set once it is recorded; `release()` lets the answer go."""

    action: str
    order: str
    reached: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()


@dataclass
class LedgerApp:
    effects: list[Effect] = field(default_factory=list)
    holds: list[Hold] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        parts = [part for part in scope["path"].split("/") if part]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["method"] == "GET" and len(parts) == 2 and parts[0] == "lookup":
            await _json(send, 200, {"item": parts[1], "price": 42, "in_stock": True})
            return
        if scope["method"] == "POST" and len(parts) == 2 and parts[0] == "effects":
            await self._effect(send, action=parts[1], key=headers.get("idempotency-key", ""), body=body)
            return
        await _json(send, 404, {"error": "no such route"})

    async def _effect(self, send: Send, *, action: str, key: str, body: bytes) -> None:
        if not key:
            await _json(send, 400, {"error": "Idempotency-Key header is required on every POST"})
            return
        try:
            order = str(json.loads(body or b"{}").get("order", ""))
        except (ValueError, AttributeError):
            await _json(send, 400, {"error": "the body must be a JSON object with an order"})
            return
        with self.lock:
            self.effects.append(Effect(key=key, action=action, order=order, at=time.time()))
            seen = sum(1 for effect in self.effects if effect.key == key)
            hold = next(
                (h for h in self.holds if h.action == action and h.order == order and not h.reached.is_set()),
                None,
            )
        if hold is not None:
            hold.reached.set()
            # A threading.Event, set from the test's thread: waited on off the server's loop.
            await asyncio.to_thread(hold.released.wait, _HOLD_LIMIT_S)
        await _json(send, 200, {"applied": action, "key": key, "times_seen": seen})


async def _json(send: Send, status: int, payload: Any) -> None:
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


@dataclass
class RunningLedger:
    app: LedgerApp
    server: uvicorn.Server
    thread: threading.Thread
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hold(self, action: str, order: str) -> Hold:
        """Hold the next POST of `action` for `order` after recording it, until released."""
        hold = Hold(action=action, order=order)
        with self.app.lock:
            self.app.holds.append(hold)
        return hold

    def effects(self, order: str) -> list[Effect]:
        with self.app.lock:
            return [effect for effect in self.app.effects if effect.order == order]

    def duplicates(self, order: str) -> int:
        """How many POSTs for `order` repeated a key already seen: duplicated side effects."""
        counts = Counter(effect.key for effect in self.effects(order))
        return sum(n - 1 for n in counts.values())

    def stop(self) -> None:
        with self.app.lock:
            for hold in self.app.holds:
                hold.release()
        self.server.should_exit = True
        self.thread.join(timeout=10)


@contextlib.contextmanager
def running_ledger_provider() -> Iterator[RunningLedger]:
    """Serve on 127.0.0.1 (a free port) in a daemon thread for the block."""
    app = LedgerApp()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", access_log=False, lifespan="on", loop="asyncio"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="ledger-provider", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the ledger provider did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    provider = RunningLedger(app=app, server=server, thread=thread, port=port)
    try:
        yield provider
    finally:
        provider.stop()
