"""The Tool Pod's memory of the calls it ran, by `(execution_id, step)`: a call sent again runs once.

The OE sends a step to the Tool Pod again when the OE that first sent it died before storing the outcome
(the new OE finds the step claimed and unfinished and cannot know whether the call ran). Here, a call with
the same `(route, execution_id, step)` and the same body joins the first one while it runs and gets its
recorded outcome once it has finished, so the tool body (and the provider's side effect) runs once.

The first call runs as its own task: an OE that hangs up (it died) does not cancel it, and its outcome
waits here for the OE that asks again. Entries live `ttl_s` (one hour) and at most `max_entries` are kept,
oldest finished first; this covers an OE restart with room to spare, not a Tool Pod restart (memory only:
a Tool Pod that dies mid-call leaves the OE with a lost answer, which it records as the tool's failure and
never sends again).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agent_runtime.protocol import CallOutcome

logger = logging.getLogger(__name__)

DEFAULT_TTL_S = 3600.0
DEFAULT_MAX_ENTRIES = 4096

Key = tuple[str, str, int]


@dataclass
class _Entry:
    digest: bytes
    task: asyncio.Task[CallOutcome]
    at: float


class RecentCalls:
    """`once(...)` runs a keyed call at most once while its entry is kept."""

    def __init__(
        self,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()
        self.replayed = 0  # how many calls were answered from here instead of running again

    def __len__(self) -> int:
        return len(self._entries)

    async def once(
        self,
        *,
        route: str,
        execution_id: str | None,
        step: int | None,
        body: bytes,
        run: Callable[[], Awaitable[CallOutcome]],
    ) -> CallOutcome:
        """The outcome of `run()`, run once per `(route, execution_id, step)` and body; a call without an
        execution or a step (a direct call, not the OE's) just runs."""
        if not execution_id or not step:
            return await run()
        key = (route, execution_id, step)
        digest = hashlib.blake2b(body, digest_size=16).digest()
        now = self._clock()
        self._expire(now)
        entry = self._entries.get(key)
        if entry is not None and entry.digest == digest:
            self.replayed += 1
            logger.info(
                "%s for execution %s step %d was already %s here; answering the same outcome",
                route,
                execution_id,
                step,
                "run" if entry.task.done() else "running",
            )
            return await asyncio.shield(entry.task)
        if entry is not None:
            # Another call under the same key is not a resend: run it, and remember it instead.
            logger.warning(
                "%s for execution %s step %d changed; running the new call", route, execution_id, step
            )
        task = asyncio.get_running_loop().create_task(_outcome_of(run))
        self._entries[key] = _Entry(digest=digest, task=task, at=now)
        self._entries.move_to_end(key)
        self._trim()
        return await asyncio.shield(task)

    def _expire(self, now: float) -> None:
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if now - entry.at < self._ttl_s or not entry.task.done():
                return
            del self._entries[key]

    def _trim(self) -> None:
        if len(self._entries) <= self._max_entries:
            return
        for key in [key for key, entry in self._entries.items() if entry.task.done()]:
            del self._entries[key]
            if len(self._entries) <= self._max_entries:
                return


async def _outcome_of(run: Callable[[], Awaitable[CallOutcome]]) -> CallOutcome:
    return await run()
