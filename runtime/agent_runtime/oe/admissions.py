"""Starting queued executions (`onLimit: queue`, issue 34) when a slot frees: after a run ends, an
execution is cancelled or failed (a kick), and on every watchdog tick, so a queue survives an OE restart
(it is in the store). One replica admits each Agent's queue at a time (a lease per Agent)."""

from __future__ import annotations

import asyncio

from agent_runtime.oe.context import EngineContext
from agent_runtime.oe.leases import Leases
from agent_runtime.oe.limiter import Limiter
from agent_runtime.oe.queue_order import Admission, admission, fifo
from agent_runtime.oe.runs import Runs
from agent_runtime.oe.store.base import ExecutionRecord
from agent_runtime.protocol import ExecutionState

S = ExecutionState


class Admissions:
    def __init__(self, ctx: EngineContext, *, limiter: Limiter, runs: Runs, leases: Leases) -> None:
        self.ctx = ctx
        self.limiter = limiter
        self.runs = runs
        self.leases = leases
        self._lock = asyncio.Lock()

    def kick(self, agent: str) -> None:
        """A slot of `agent` may have freed: admit its queue in the background."""
        self.runs.spawn(self._admit_quietly())

    async def _admit_quietly(self) -> None:
        await self.admit()

    async def admit(self) -> int:
        """Start every queued execution that fits now, oldest first; how many were started."""
        async with self._lock:
            queued = await self._queued()
            if not queued:
                return 0
            now = self.ctx.clock()
            full: set[str] = set()
            leased: dict[str, bool] = {}
            started = 0
            for record in fifo(queued):
                agent = record.agent
                if agent in full:
                    continue
                if agent not in leased:
                    leased[agent] = await self.leases.acquire(f"admissions:{agent}", now=now)
                reg = self.ctx.registry.get(agent)
                if not leased[agent] or reg is None:
                    continue  # another replica admits this Agent's queue (or it is not registered)
                verdict = admission(await self.limiter.room(reg, user_id=record.user_id))
                if verdict is Admission.AGENT_FULL:
                    full.add(agent)
                    continue
                if verdict is Admission.USER_FULL:
                    continue
                pending = await self.ctx.store.transition(
                    record.execution_id,
                    from_states=frozenset({S.QUEUED}),
                    changes={"status": S.PENDING, "updated_at": self.ctx.clock()},
                )
                if pending is None:
                    continue  # cancelled meanwhile
                await self.ctx.events.publish(record.execution_id, type="pending")
                self.runs.start_later(pending, reg, resume=False)
                started += 1
            return started

    async def _queued(self) -> list[ExecutionRecord]:
        found: list[ExecutionRecord] = []
        cursor: str | None = None
        while True:
            page = await self.ctx.store.list_executions(status=S.QUEUED, limit=500, cursor=cursor)
            found.extend(page.items)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor
