"""The Tool Pod's memory of the calls it ran, by `(execution_id, step)`: a call sent again runs once.

The OE sends a step to the Tool Pod again when the OE that first sent it died before storing the outcome
(the new OE finds the step claimed and unfinished and cannot know whether the call ran). Here, a call with
the same `(route, execution_id, step)` and the same body joins the first one while it runs and gets its
recorded outcome once it has finished, so the tool body (and the provider's side effect) runs once.

The first call runs as its own task: an OE that hangs up (it died) does not cancel it, and its outcome
waits here for the OE that asks again. Once the call has finished only its outcome is kept, as the JSON the
OE would have read (a few hundred bytes for a typical tool result), not the task, its context and the parsed
model (about 1.7 KB more each: the soak's Tool Pod grew 6% over 15 minutes filling 4,096 of those). Entries
live `ttl_s` (one hour) and the finished ones are kept to at most `max_entries` and `max_bytes` of outcomes,
oldest first, so a run of large results (a model's long answers, results near the body cap) cannot hold
gigabytes. This covers an OE restart with room to spare, not a Tool Pod restart (memory only: a Tool Pod
that dies mid-call leaves the OE with a lost answer, which it records as the tool's failure and never sends
again).
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
DEFAULT_MAX_BYTES = 16 * 2**20

Key = tuple[str, str, int]

_to_json = CallOutcome.__pydantic_serializer__.to_json


@dataclass(slots=True)
class _Entry:
    digest: bytes
    at: float
    task: asyncio.Task[CallOutcome] | None  # while the call runs (or when it raised: kept as it ended)
    outcome: bytes | None = None  # the finished call's outcome as JSON; the task is let go


class RecentCalls:
    """`once(...)` runs a keyed call at most once while its entry is kept."""

    def __init__(
        self,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._clock = clock
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()
        self._bytes = 0  # of the outcomes kept
        self.replayed = 0  # how many calls were answered from here instead of running again

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def outcome_bytes(self) -> int:
        return self._bytes

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
                "run" if self._done(entry) else "running",
            )
            if entry.outcome is not None:
                return CallOutcome.model_validate_json(entry.outcome)
            assert entry.task is not None
            return await asyncio.shield(entry.task)
        if entry is not None:
            # Another call under the same key is not a resend: run it, and remember it instead.
            logger.warning(
                "%s for execution %s step %d changed; running the new call", route, execution_id, step
            )
            self._forget(key)
        task = asyncio.get_running_loop().create_task(_outcome_of(run))
        entry = _Entry(digest=digest, at=now, task=task)
        self._entries[key] = entry
        task.add_done_callback(lambda done: self._finished(key, entry, done))
        self._trim()
        return await asyncio.shield(task)

    def _finished(self, key: Key, entry: _Entry, task: asyncio.Task[CallOutcome]) -> None:
        """Keep the outcome as JSON and let the task go; then trim to the bounds."""
        if self._entries.get(key) is not entry:
            return  # replaced or expired while it ran
        if not task.cancelled() and task.exception() is None:
            entry.outcome = _to_json(task.result())
            entry.task = None
            self._bytes += len(entry.outcome)
        self._trim()

    @staticmethod
    def _done(entry: _Entry) -> bool:
        return entry.task is None or entry.task.done()

    def _forget(self, key: Key) -> None:
        entry = self._entries.pop(key)
        if entry.outcome is not None:
            self._bytes -= len(entry.outcome)

    def _expire(self, now: float) -> None:
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if now - entry.at < self._ttl_s or not self._done(entry):
                return
            self._forget(key)

    def _trim(self) -> None:
        """Forget the oldest finished entries until both bounds hold (running ones stay: they are owed)."""
        count, size = len(self._entries), self._bytes
        victims = []
        for key, entry in self._entries.items():
            if count <= self._max_entries and size <= self._max_bytes:
                break
            if self._done(entry):
                victims.append(key)
                count -= 1
                size -= len(entry.outcome or b"")
        for key in victims:
            self._forget(key)


async def _outcome_of(run: Callable[[], Awaitable[CallOutcome]]) -> CallOutcome:
    return await run()
