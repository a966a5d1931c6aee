"""Looking after executions nobody is driving (issue 42): runs created but never handed over (after an
OE start), running executions whose AER went quiet (the watchdog), and approval deadlines."""

from __future__ import annotations

import logging

from agent_runtime.oe.admissions import Admissions
from agent_runtime.oe.children import Children
from agent_runtime.oe.context import EngineContext
from agent_runtime.oe.leases import Leases, watchdog_key
from agent_runtime.oe.recorder import Recorder
from agent_runtime.oe.resumes import Resumes
from agent_runtime.oe.runs import Runs
from agent_runtime.oe.store.base import ExecutionRecord
from agent_runtime.protocol import AER_LOST, CallError, ExecutionState

logger = logging.getLogger(__name__)

S = ExecutionState


class Recovery:
    def __init__(
        self,
        ctx: EngineContext,
        *,
        recorder: Recorder,
        runs: Runs,
        resumes: Resumes,
        admissions: Admissions,
        children: Children,
        leases: Leases,
        aer_lost_after_s: float,
        run_restarts: int,
    ) -> None:
        self.ctx = ctx
        self.recorder = recorder
        self.runs = runs
        self.resumes = resumes
        self.admissions = admissions
        self.children = children
        self.leases = leases
        self.aer_lost_after_s = aer_lost_after_s
        self.run_restarts = run_restarts

    async def recover(self) -> None:
        """After a start: runs that were created but never handed to an AER are started now, then the
        queue (onLimit: queue) is admitted as far as there is room."""
        cursor: str | None = None
        while True:
            page = await self.ctx.store.list_executions(status=S.PENDING, limit=200, cursor=cursor)
            for record in page.items:
                reg = self.ctx.registry.get(record.agent)
                if reg is not None:
                    self.runs.start_later(record, reg, resume=False)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        await self.admissions.admit()

    async def watchdog_once(self) -> int:
        """Look after running executions whose AER has been quiet: a run the AER no longer has (it
        restarted) is started again, up to `run_restarts` times; an AER that cannot be reached for
        `aer_lost_after_s` more fails it (`aer_lost`). Returns how many were failed."""
        failed = 0
        cursor: str | None = None
        now = self.ctx.clock()
        await self.resumes.expire(now)
        await self.children.sweep()  # parents whose child moved on while no OE was there to see it
        await self.admissions.admit()  # queued executions a slot freed for, also after an OE restart
        while True:
            page = await self.ctx.store.list_executions(status=S.RUNNING, limit=200, cursor=cursor)
            for record in page.items:
                if now - record.updated_at < self.aer_lost_after_s:
                    continue
                if not await self.leases.acquire(watchdog_key(record.execution_id), now=now):
                    continue  # another replica looks after it
                if await self._look_after(record, now=now):
                    failed += 1
            if page.next_cursor is None:
                return failed
            cursor = page.next_cursor

    async def _look_after(self, record: ExecutionRecord, *, now: float) -> bool:
        """One quiet running execution; True if it was failed."""
        execution_id = record.execution_id
        unreachable = self.ctx.unreachable
        reg = self.ctx.registry.get(record.agent)
        alive = None if reg is None else await self.ctx.runtimes.execution_alive(reg, execution_id)
        if alive:
            unreachable.pop(execution_id, None)
            await self.ctx.store.update_execution(execution_id, {"updated_at": now})
            return False
        if alive is None or reg is None:
            first = unreachable.setdefault(execution_id, now)
            if now - first < self.aer_lost_after_s:
                return False  # a restarting AER gets as long again to come back
            unreachable.pop(execution_id, None)
            lost = CallError(category=AER_LOST, explanation="the AER could not be reached")
            return await self.runs.fail(record, lost)
        unreachable.pop(execution_id, None)
        if record.restarts >= self.run_restarts:
            why = f"the AER lost the run {record.restarts + 1} times"
            return await self.runs.fail(record, CallError(category=AER_LOST, explanation=why))
        # The AER answers but does not run it: it restarted mid-run, or never got the run (its OE died
        # first). Run it again: the replay answers every step already held, so nothing runs twice.
        restarted = await self.ctx.store.transition(
            execution_id,
            from_states=frozenset({S.RUNNING}),
            changes={"restarts": record.restarts + 1, "runs": record.runs + 1, "updated_at": now},
        )
        if restarted is None:
            return False
        logger.warning("execution %s: its AER no longer runs it; starting it again", execution_id)
        await self.recorder.audit(
            restarted, kind="restart", decision="restarted", status="accepted", reason=AER_LOST
        )
        await self.ctx.events.publish(execution_id, type="restarted", data={"restarts": restarted.restarts})
        self.runs.start_later(restarted, reg, resume=True, counted=True)
        return False
