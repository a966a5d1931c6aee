"""Stopping work (issue 42): cancelling an execution (its runtimes drained, OE-17) and interrupting one
call of a running execution (OE-18)."""

from __future__ import annotations

import asyncio
from typing import Literal

from agent_runtime.oe import spans
from agent_runtime.oe.context import EngineContext
from agent_runtime.oe.drains import DrainCaller
from agent_runtime.oe.errors import Conflict
from agent_runtime.oe.executions import Executions
from agent_runtime.oe.lifecycle import ENTER_FROM
from agent_runtime.oe.recorder import Recorder
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.store.base import ExecutionRecord, Identity, StepDecider
from agent_runtime.oe.store.deliveries import DeliveryRecord
from agent_runtime.oe.tool_lookup import ToolLookup
from agent_runtime.protocol import AGENT_SUSPEND, INVOKE_LLM, ExecutionState

S = ExecutionState
# How long a cancel waits for a resume that claimed the decision first to write its state change.
RESUME_LANDS_S = 5.0


class Cancellation:
    def __init__(
        self,
        ctx: EngineContext,
        *,
        executions: Executions,
        recorder: Recorder,
        drains: DrainCaller,
        tools: ToolLookup,
    ) -> None:
        self.ctx = ctx
        self.executions = executions
        self.recorder = recorder
        self.drains = drains
        self.tools = tools

    async def cancel(self, execution_id: str, *, decided_by: Identity | None = None) -> ExecutionRecord:
        """Make the cancel durable; the run's next call or callback is refused."""
        record = await self.executions.get(execution_id)
        if record.status is S.SUSPENDED:
            await self._claim_cancel(record)
        now = self.ctx.clock()
        updated = await self.ctx.store.transition(
            execution_id,
            from_states=ENTER_FROM[S.CANCELLED],
            changes={
                "status": S.CANCELLED,
                "cancel_requested": True,
                "updated_at": now,
                "finished_at": now,
                "cancelled_by": decided_by,
            },
        )
        if updated is None:
            current = await self.executions.get(execution_id)
            raise Conflict("execution_final", f"the execution is already {current.status.value}")
        await self.recorder.audit(
            updated, kind="cancel", decision="cancelled", status="accepted", decided_by=decided_by
        )
        await self.ctx.events.publish(execution_id, type="cancelled")
        spans.run_ended(execution_id, status=S.CANCELLED.value)
        # Durable before the answer: every runtime that served it is drained, also after an OE restart.
        await self.drains.drain(updated, reason="cancelled by the client")
        self.ctx.slot_freed(updated.agent)
        self.ctx.settled(updated)
        return updated

    async def interrupt(
        self, execution_id: str, step: int, *, decided_by: Identity | None = None
    ) -> DeliveryRecord:
        """Stop the one call at `step` of a running execution (OE-18); the execution goes on."""
        record = await self.executions.get(execution_id)
        if record.status is not S.RUNNING:
            raise Conflict(
                "execution_not_running",
                f"the execution is {record.status.value}: only a running execution has calls to interrupt",
            )
        reg = self.ctx.registry.get(record.agent)
        if reg is None:
            raise Conflict("agent_not_registered", f"Agent {record.agent!r} is no longer registered")
        runs_in = await self._runs_in(reg, record.execution_id, step)
        delivery = await self.drains.interrupt(record, step, reg=reg, component=runs_in)
        if decided_by is not None:
            current = await self.executions.get(execution_id)
            asked = StepDecider(step=step, by=decided_by, at=self.ctx.clock())
            await self.ctx.store.update_execution(
                execution_id, {"interrupted_by": [*current.interrupted_by, asked]}
            )
        await self.recorder.audit(
            record,
            kind="interrupt",
            step=step,
            decision="requested",
            status="accepted",
            decided_by=decided_by,
        )
        return delivery

    async def _runs_in(
        self, reg: AgentRegistration, execution_id: str, step: int
    ) -> Literal["aer", "tool"] | None:
        """Where the call at `step` runs: the AER for a local tool, the Tool Pod for the others and for model
        calls; None when the OE has not seen that step yet."""
        claimed = await self.ctx.store.get_step(execution_id, step)
        if claimed is None or claimed.tool == AGENT_SUSPEND:
            return None
        if claimed.tool == INVOKE_LLM:
            return "tool"
        entry = await self.tools.entry(reg, claimed.tool)
        if entry is None:
            return None
        return "aer" if entry.location == "local" else "tool"

    async def _claim_cancel(self, record: ExecutionRecord) -> None:
        """A cancel of a suspended execution is the decision on its suspension, claimed like a resume's; if
        a resume claimed it first, let its state change land before the cancel writes (on FerretDB v1 the
        two writes would otherwise race, and the cancel could be lost under the resume's)."""
        key = f"decision:{record.execution_id}:{len(record.reviews)}"
        taken = await self.ctx.store.claim_once(key, {"decision": "cancelled"})
        if taken is None or taken.get("decision") == "cancelled":
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RESUME_LANDS_S
        while loop.time() < deadline:
            current = await self.ctx.store.get_execution(record.execution_id)
            if current is None or current.status is not S.SUSPENDED:
                return
            await asyncio.sleep(0.05)
