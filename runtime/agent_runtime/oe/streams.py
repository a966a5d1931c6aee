"""Live delivery of an execution's events to the subscribers in this process: one bounded buffer each.

Publishing never waits for a subscriber. Each open event stream (an SSE client) has a buffer of at most
`limit` events; the publisher appends and moves on. A subscriber that falls that far behind (a stalled
client) is marked `lagging` and its buffer dropped: it is told to resume from the last event it got
(`Last-Event-ID`), and reads the rest from the store then. So a slow client costs at most `limit` events
of memory and never slows the run. Events of other OE replicas are not pushed here: the follower reads
them from the store (`events.EventBus.follow`).
"""

from __future__ import annotations

import asyncio
from collections import deque

from agent_runtime.oe.store.base import EventRecord

DEFAULT_BUFFER = 1024


class Subscription:
    """One follower's buffer of pushed events (in publish order; seq gaps are the store's to fill)."""

    __slots__ = ("_limit", "_wake", "events", "execution_id", "lagging")

    def __init__(self, execution_id: str, *, limit: int) -> None:
        self.execution_id = execution_id
        self.events: deque[EventRecord] = deque()
        self.lagging = False
        self._limit = limit
        self._wake = asyncio.Event()

    def offer(self, record: EventRecord) -> None:
        """Take a published event without waiting; past the limit the subscriber is lagging instead."""
        if self.lagging:
            return
        if len(self.events) >= self._limit:
            self.lagging = True
            self.events.clear()
        else:
            self.events.append(record)
        self._wake.set()

    async def wait(self, seconds: float) -> bool:
        """Until something was offered (True) or `seconds` passed (False)."""
        if self.events or self.lagging:
            return True
        self._wake.clear()
        try:
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        except TimeoutError:
            return False
        return True


class Subscribers:
    """Every open subscription of this process, by execution."""

    def __init__(self, *, limit: int = DEFAULT_BUFFER) -> None:
        if limit < 1:
            raise ValueError("limit: a subscriber's buffer holds at least one event")
        self.limit = limit
        self._by_execution: dict[str, set[Subscription]] = {}

    def open(self, execution_id: str) -> Subscription:
        subscription = Subscription(execution_id, limit=self.limit)
        self._by_execution.setdefault(execution_id, set()).add(subscription)
        return subscription

    def close(self, subscription: Subscription) -> None:
        subscriptions = self._by_execution.get(subscription.execution_id)
        if subscriptions is None:
            return
        subscriptions.discard(subscription)
        if not subscriptions:
            del self._by_execution[subscription.execution_id]

    def deliver(self, record: EventRecord) -> None:
        for subscription in self._by_execution.get(record.execution_id, ()):
            subscription.offer(record)

    def count(self, execution_id: str | None = None) -> int:
        if execution_id is not None:
            return len(self._by_execution.get(execution_id, ()))
        return sum(len(subs) for subs in self._by_execution.values())
