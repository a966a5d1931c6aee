"""Runs of an execution on its AER: handing one over, holding what a run's step asks a human, failing an
execution, and the background tasks that do it (issue 42)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from agent_runtime.oe import spans
from agent_runtime.oe.context import EngineContext
from agent_runtime.oe.drains import DrainCaller
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.resume_plan import suspend_replies
from agent_runtime.oe.runtimes import RuntimeUnavailable
from agent_runtime.oe.store.base import ExecutionRecord
from agent_runtime.oe.store.unavailable import StoreUnavailable
from agent_runtime.protocol import AER_LOST, AERExecuteRequest, CallError, ExecutionState

logger = logging.getLogger(__name__)

S = ExecutionState


def _retrieved(task: asyncio.Task[None]) -> None:
    """A run task's error, said here rather than as asyncio's "never retrieved" traceback at collection."""
    if task.cancelled() or (exc := task.exception()) is None:
        return
    if isinstance(exc, StoreUnavailable):
        # The store logged its outage once; the run stays as the store last holds it (the watchdog's).
        logger.debug("a run's task stopped: %s", exc)
        return
    logger.error("a run's task failed: %s", type(exc).__name__, exc_info=exc)


class Runs:
    def __init__(self, ctx: EngineContext, *, drains: DrainCaller, aer_lost_after_s: float) -> None:
        self.ctx = ctx
        self.drains = drains
        self.aer_lost_after_s = aer_lost_after_s
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_retrieved)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def start_later(
        self, record: ExecutionRecord, reg: AgentRegistration, *, resume: bool, counted: bool = False
    ) -> None:
        """Start the run in the background."""
        self.spawn(self.start(record, reg, resume=resume, counted=counted))

    async def start(
        self, record: ExecutionRecord, reg: AgentRegistration, *, resume: bool, counted: bool = False
    ) -> None:
        """`_start_run` under the run's span (a child of the execution's: one execution, one trace)."""
        number = record.runs if counted else record.runs + 1
        with spans.run(
            execution_id=record.execution_id,
            agent=record.agent,
            trace_context=record.trace_context,
            number=number,
            resume=resume,
        ):
            await self._start_run(record, reg, resume=resume, counted=counted)

    async def _start_run(
        self, record: ExecutionRecord, reg: AgentRegistration, *, resume: bool, counted: bool = False
    ) -> None:
        """Hand a run to the AER. `counted`: the caller's own write already counted this run (a resume or a
        restart does, so that no second write to the execution follows it: on FerretDB v1 a write a moment
        later on another replica, a cancel, could be lost under it)."""
        store = self.ctx.store
        if counted:
            started = record
        elif not resume:
            started = await store.transition(
                record.execution_id,
                from_states=frozenset({S.PENDING}),
                changes={"status": S.RUNNING, "runs": record.runs + 1, "updated_at": self.ctx.clock()},
            )
            if started is None:
                return  # cancelled before it started, or another replica started it
            await self.ctx.events.publish(record.execution_id, type="running")
        else:
            started = await store.transition(
                record.execution_id,
                from_states=frozenset({S.RUNNING}),
                changes={"runs": record.runs + 1, "updated_at": self.ctx.clock()},
            )
            if started is None:
                return  # cancelled (or failed) meanwhile
        request = AERExecuteRequest(
            execution_id=started.execution_id,
            workspace_id=started.workspace_id,
            session_id=started.session_id,
            user_id=started.user_id,
            org_id=started.org_id,
            input=started.input,
            resume=resume,
            suspend_replies=suspend_replies(started),
            stream_mode=started.stream_mode,
            agent_refs=[ref.schema() for ref in reg.agent_refs],
        )
        # A restarting AER refuses connections for a moment: retry for as long as the watchdog would wait,
        # then leave the run to the watchdog, which starts it once the AER answers or fails it (`aer_lost`)
        # when the AER stays out of reach.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.aer_lost_after_s
        delay = 0.2
        while True:
            try:
                accepted = await self.ctx.runtimes.start_run(reg, request)
                # The pod that took the run is where a drain of it goes (Decision 8).
                await self.drains.served(
                    started.execution_id,
                    "aer",
                    pod_name=accepted.pod_name if accepted else None,
                    address=accepted.pod_address if accepted else None,
                    fallback=reg.aer_url,
                )
                return
            except RuntimeUnavailable as exc:
                if not exc.retryable:
                    await self.fail(started, CallError(category=AER_LOST, explanation=str(exc)))
                    return
                if loop.time() + delay > deadline:
                    logger.warning("execution %s: %s; the watchdog takes it over", started.execution_id, exc)
                    return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
            current = await self.ctx.store.get_execution(started.execution_id)
            if current is None or current.status is not S.RUNNING:
                return

    async def hold(self, execution_id: str, payload: Any) -> None:
        """Remember which step suspended the run and what it asks, for the callback and the resume; of
        several suspended steps in one run (calls made together), the first in program order is asked."""
        held = payload if isinstance(payload, dict) else {"reason": str(payload)}
        current = await self.ctx.store.get_execution(execution_id)
        before = current.suspension if current is not None else None
        earlier = (
            before is not None
            and isinstance(before.get("step"), int)
            and isinstance(held.get("step"), int)
            and before["step"] < held["step"]
        )
        if earlier:
            return
        await self.ctx.store.update_execution(execution_id, {"suspension": held})

    async def fail(self, record: ExecutionRecord, error: CallError) -> bool:
        """Fail a pending or running execution; False when it had already moved on."""
        now = self.ctx.clock()
        updated = await self.ctx.store.transition(
            record.execution_id,
            from_states=frozenset({S.PENDING, S.RUNNING}),
            changes={"status": S.FAILED, "error": error, "updated_at": now, "finished_at": now},
        )
        if updated is None:
            return False
        self.ctx.unreachable.pop(record.execution_id, None)
        spans.run_ended(record.execution_id, status=S.FAILED.value, error_category=error.category)
        self.ctx.observer.execution_failed(record.agent, error.category)
        logger.warning("execution %s failed: %s", record.execution_id, error.category)
        await self.ctx.events.publish(record.execution_id, type="failed", data={"error": error.model_dump()})
        self.ctx.slot_freed(record.agent)
        self.ctx.settled(updated)
        return True
