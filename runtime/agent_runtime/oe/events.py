"""Each execution's event stream: durable in the store, pushed to live listeners in this process.

A client may attach at any time: it first gets every event after the `seq` it names, then new ones as
they happen. Another OE replica's events reach a listener through the store within `poll_s`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from agent_runtime.oe.lifecycle import FINAL_EVENTS
from agent_runtime.oe.store.base import EventRecord, Store


class EventBus:
    def __init__(self, *, store: Store, poll_s: float = 1.0) -> None:
        self._store = store
        self._poll_s = poll_s
        self._waiters: dict[str, asyncio.Event] = {}

    async def publish(
        self, execution_id: str, *, type: str, step: int | None = None, data: dict[str, Any] | None = None
    ) -> EventRecord:
        record = await self._store.append_event(
            execution_id, type=type, step=step, data=data or {}, at=time.time()
        )
        waiter = self._waiters.pop(execution_id, None)
        if waiter is not None:
            waiter.set()
        return record

    async def follow(
        self, execution_id: str, *, after_seq: int = 0, heartbeat_s: float = 15.0
    ) -> AsyncIterator[EventRecord | None]:
        """Events after `after_seq` until a final one; yields None as a heartbeat while nothing happens."""
        last = after_seq
        idle = 0.0
        while True:
            waiter = self._waiters.setdefault(execution_id, asyncio.Event())
            events = await self._store.list_events(execution_id, after_seq=last)
            for event in events:
                last = event.seq
                yield event
                if event.type in FINAL_EVENTS:
                    return
            if events:
                idle = 0.0
                continue
            try:
                await asyncio.wait_for(waiter.wait(), timeout=self._poll_s)
            except TimeoutError:
                idle += self._poll_s
                if idle >= heartbeat_s:
                    idle = 0.0
                    yield None
