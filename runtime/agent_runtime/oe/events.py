"""Each execution's event stream: durable in the store, pushed to live listeners in this process.

A client may attach at any time: it first gets every event after the `seq` it names (read from the store
a page at a time), then new ones as they happen, pushed into its bounded buffer (`streams.Subscribers`).
Another OE replica's events reach a listener through the store within `poll_s`. A listener that falls a
whole buffer behind gets a `Lagging` mark instead of more events: it must resume from its last event.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from agent_runtime.oe.event_retention import EventPruner, EventRetention
from agent_runtime.oe.lifecycle import FINAL_EVENTS
from agent_runtime.oe.store.base import EventRecord, Store
from agent_runtime.oe.streams import DEFAULT_BUFFER, Subscribers

# Events read from the store at a time while a listener catches up.
PAGE = 500


@dataclass(frozen=True)
class Lagging:
    """The listener fell `limit` events behind: it is to reconnect after `after` (its last event's seq)."""

    after: int


class EventBus:
    def __init__(
        self, *, store: Store, poll_s: float = 1.0, buffer: int = DEFAULT_BUFFER, page: int = PAGE
    ) -> None:
        self._store = store
        self._poll_s = poll_s
        self._page = page
        self.subscribers = Subscribers(limit=buffer)
        # Old stream events go (event_retention.py); the OE's settings replace the default (`retain`).
        self.pruner: EventPruner | None = EventPruner(store, EventRetention())  # type: ignore[arg-type]

    def retain(self, retention: EventRetention) -> None:
        """Prune old stream events from the publish path (event_retention.py)."""
        self.pruner = EventPruner(self._store, retention)  # type: ignore[arg-type]

    async def publish(
        self, execution_id: str, *, type: str, step: int | None = None, data: dict[str, Any] | None = None
    ) -> EventRecord:
        record = await self._store.append_event(
            execution_id, type=type, step=step, data=data or {}, at=time.time()
        )
        self.subscribers.deliver(record)
        if self.pruner is not None:
            self.pruner.after_append()
        return record

    async def follow(
        self, execution_id: str, *, after_seq: int = 0, heartbeat_s: float = 15.0
    ) -> AsyncIterator[EventRecord | Lagging | None]:
        """Events after `after_seq` until a final one; None as a heartbeat while nothing happens; a
        `Lagging` (and the end) when this listener fell a whole buffer behind."""
        subscription = self.subscribers.open(execution_id)
        last = after_seq
        idle = 0.0
        try:
            need_store = True
            while True:
                if subscription.lagging:
                    yield Lagging(after=last)
                    return
                if need_store:
                    # A page from the store: the backlog, a gap (another replica's events), or a poll.
                    events = await self._store.list_events(execution_id, after_seq=last, limit=self._page)
                    for event in events:
                        last = event.seq
                        yield event
                        if event.type in FINAL_EVENTS:
                            return
                    need_store = len(events) >= self._page
                    if events:
                        idle = 0.0
                    if need_store:
                        continue
                while subscription.events and not subscription.lagging:
                    event = subscription.events.popleft()
                    if event.seq <= last:
                        continue  # read from the store already
                    if event.seq != last + 1:
                        need_store = True  # someone else's events in between: the store has them
                        subscription.events.appendleft(event)
                        break
                    last = event.seq
                    idle = 0.0
                    yield event
                    if event.type in FINAL_EVENTS:
                        return
                if need_store or subscription.lagging:
                    continue
                if not await subscription.wait(self._poll_s):
                    need_store = True
                    idle += self._poll_s
                    if idle >= heartbeat_s:
                        idle = 0.0
                        yield None
        finally:
            self.subscribers.close(subscription)
