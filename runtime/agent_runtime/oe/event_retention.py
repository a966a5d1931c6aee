"""How long an execution's stream events stay in the OE's store (issue 32): the events table never grows
without bound.

A model's deltas and a graph's stream-mode chunks are most of what an execution publishes; a client
reconnecting with `Last-Event-ID` needs them only for a while. So events of those types (`llm_delta`,
`values`, `updates`, `messages`, `custom`) older than `OE_EVENT_RETENTION_S` (a day by default; `0` keeps
them for ever) are deleted. Lifecycle events (`step_started`, `step_finished`, `suspended`, `completed`, ...)
live as long as the execution record, and an execution's latest event is never deleted (its next `seq` is
counted from it). The step results and the final message stay in the audit and the replay cache.

Pruning rides on publishing: at most once every `OE_EVENT_PRUNE_EVERY_S` (600 s) per OE process, an
append starts one background pass that deletes in batches of `BATCH`, so no publish waits for it. With
several replicas each prunes; the deletes are idempotent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from agent_runtime.oe.settings import SettingsError
from agent_runtime.oe.store.unavailable import StoreUnavailable

logger = logging.getLogger(__name__)

RETENTION_ENV = "OE_EVENT_RETENTION_S"
PRUNE_EVERY_ENV = "OE_EVENT_PRUNE_EVERY_S"
DEFAULT_RETENTION_S = 86_400.0
DEFAULT_PRUNE_EVERY_S = 600.0
BATCH = 1_000
# A pass stops after this many batches; the next one goes on (a backlog never holds the store for long).
MAX_BATCHES = 20
STREAM_EVENT_TYPES = frozenset({"llm_delta", "values", "updates", "messages", "custom"})


class EventRetentionError(SettingsError):
    """A retention setting is malformed; the message names the variable and the fix."""


class _PrunableStore(Protocol):
    async def prune_events(self, *, types: frozenset[str], before: float, limit: int) -> int: ...


@dataclass(frozen=True)
class EventRetention:
    retention_s: float = DEFAULT_RETENTION_S  # 0: stream events are kept as long as the execution
    every_s: float = DEFAULT_PRUNE_EVERY_S

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> EventRetention:
        return cls(
            retention_s=_seconds(env, RETENTION_ENV, DEFAULT_RETENTION_S, allow_zero=True),
            every_s=_seconds(env, PRUNE_EVERY_ENV, DEFAULT_PRUNE_EVERY_S, allow_zero=False),
        )

    def cutoff(self, now: float) -> float | None:
        """Stream events stored before this are due to go (None: retention is off)."""
        return None if self.retention_s == 0 else now - self.retention_s

    def due(self, now: float, *, last_pass: float | None) -> bool:
        """Whether an append at `now` starts a pass."""
        return self.retention_s > 0 and (last_pass is None or now - last_pass >= self.every_s)


class EventPruner:
    """Starts a pruning pass from the publish path when one is due; one pass at a time per process."""

    def __init__(
        self, store: _PrunableStore, retention: EventRetention, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self.retention = retention
        self._clock = clock
        self._last_pass: float | None = None
        self._task: asyncio.Task[int] | None = None
        self.pruned = 0  # events this process deleted (a figure for tests and logs)

    def after_append(self) -> None:
        now = self._clock()
        if self._task is not None and not self._task.done():
            return
        if not self.retention.due(now, last_pass=self._last_pass):
            return
        self._last_pass = now
        self._task = asyncio.get_running_loop().create_task(self.prune(now))

    async def prune(self, now: float) -> int:
        """One pass: delete due stream events in batches; returns how many went. Never raises."""
        before = self.retention.cutoff(now)
        if before is None:
            return 0
        deleted = 0
        try:
            for _ in range(MAX_BATCHES):
                went = await self._store.prune_events(types=STREAM_EVENT_TYPES, before=before, limit=BATCH)
                deleted += went
                if went < BATCH:
                    break
        except StoreUnavailable:
            pass  # the store logged its outage once; the next pass tries again
        except Exception as exc:  # a store hiccup: the next pass tries again
            logger.warning("pruning old stream events failed (%s); retried later", type(exc).__name__)
        self.pruned += deleted
        if deleted:
            logger.info("pruned %d stream events older than %.0f s", deleted, self.retention.retention_s)
        return deleted

    async def idle(self) -> None:
        """Until the running pass (if any) is done."""
        if self._task is not None:
            await asyncio.shield(self._task)


def _seconds(env: Mapping[str, str], name: str, default: float, *, allow_zero: bool) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value != value or value in (float("inf"),) or value < 0 or (value == 0 and not allow_zero):
        least = "0 (keep for ever) or more" if allow_zero else "more than 0"
        raise EventRetentionError(f"{name}={raw!r}: give a number of seconds, {least}")
    return value
