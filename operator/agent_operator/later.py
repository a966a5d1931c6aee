"""Deferred work per key: at most one pending call per key, at the earliest time asked for."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class Later(Generic[K]):
    """`at(key, delay, action)` runs `action()` in `delay` seconds unless `key` already has a call due no
    later; one due later is replaced. The entry is gone when the call starts, so work the call itself
    triggers (or that arrives meanwhile) is scheduled anew, never lost."""

    def __init__(self) -> None:
        self._due: dict[K, tuple[float, asyncio.Task[None]]] = {}

    def __contains__(self, key: K) -> bool:
        return key in self._due

    def at(self, key: K, delay: float, action: Callable[[], Awaitable[None]]) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        scheduled = self._due.get(key)
        if scheduled is not None:
            if scheduled[0] <= due:
                return
            scheduled[1].cancel()
        self._due[key] = (due, loop.create_task(self._run(key, delay, action)))

    async def _run(self, key: K, delay: float, action: Callable[[], Awaitable[None]]) -> None:
        await asyncio.sleep(delay)
        del self._due[key]
        await action()

    def cancel_all(self) -> None:
        for _, task in self._due.values():
            task.cancel()
        self._due.clear()
