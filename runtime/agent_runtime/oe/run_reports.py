"""What an AER reports about a run besides its steps (issue 42): the run's end (the callback) and its
LangGraph stream-mode chunks (issue 32)."""

from __future__ import annotations

from typing import Any

from agent_runtime.oe import spans
from agent_runtime.oe.audit import redact_value
from agent_runtime.oe.context import EngineContext
from agent_runtime.oe.errors import Conflict
from agent_runtime.oe.executions import Executions
from agent_runtime.oe.graph_stream import chunk_event_data, chunk_refusal
from agent_runtime.oe.recorder import Recorder
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.review_notices import ReviewNotices
from agent_runtime.oe.run_end import changes, conflict_code, same
from agent_runtime.oe.store.base import ExecutionRecord
from agent_runtime.protocol import ExecutionState, ExecutorCallback, GraphStreamChunk, state_of_callback

S = ExecutionState


class RunReports:
    def __init__(
        self,
        ctx: EngineContext,
        *,
        executions: Executions,
        recorder: Recorder,
        notices: ReviewNotices,
    ) -> None:
        self.ctx = ctx
        self.executions = executions
        self.recorder = recorder
        self.notices = notices

    async def callback(self, caller: AgentRegistration, report: ExecutorCallback) -> ExecutionRecord:
        """The end of one run: completed, suspended or failed. Idempotent; a conflicting one is a 409."""
        current = await self.executions.owned(caller, report.execution_id)
        report = self.ctx.secrets.scrubbed_callback(report, caller)
        target = state_of_callback(report.status)
        updated = await self.ctx.store.transition(
            report.execution_id,
            from_states=frozenset({S.RUNNING}),
            changes=changes(current, report, now=self.ctx.clock()),
        )
        if updated is None:
            current = await self.executions.get(report.execution_id)
            if same(current, report):
                return current
            await self.recorder.audit(
                current, kind="callback", decision="conflict", status="refused", reason=report.status.value
            )
            raise Conflict(
                conflict_code(current),
                f"the execution is {current.status.value}; a {report.status.value} callback cannot change it",
            )
        await self.recorder.audit(
            updated,
            kind="callback",
            decision=report.status.value.lower(),
            status="accepted",
            error_category=report.error.category if report.error else None,
        )
        spans.run_ended(
            report.execution_id,
            status=target.value,
            error_category=report.error.category if report.error else None,
        )
        data: dict[str, Any] = {}
        if report.error is not None:
            data["error"] = report.error.model_dump()
        if target is S.SUSPENDED and updated.suspension is not None:
            data["suspension"] = redact_value(updated.suspension, secrets=self.ctx.secrets.of(caller))
        await self.ctx.events.publish(report.execution_id, type=target.value, data=data)
        if target is S.SUSPENDED:
            self.notices.announce(caller, "review.created", updated)
        self.ctx.slot_freed(updated.agent)  # a suspended execution holds no slot either
        self.ctx.settled(updated)
        return updated

    async def graph_stream(self, caller: AgentRegistration, chunk: GraphStreamChunk) -> None:
        """Publish one LangGraph stream-mode chunk of the caller's own running execution (issue 32)."""
        record = await self.executions.owned(caller, chunk.execution_id)
        refusal = chunk_refusal(record, mode=chunk.mode)
        if refusal is not None:
            raise Conflict("stream_refused", refusal)
        data = chunk_event_data(
            chunk.data,
            secrets=self.ctx.secrets.all(caller),
            max_bytes=self.ctx.streaming.step_result_max_bytes,
        )
        await self.ctx.events.publish(chunk.execution_id, type=chunk.mode, data=data)
