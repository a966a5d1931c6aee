"""The audit records the OE writes, and what a step's `step_finished` event carries (issue 42).

Every part that audits goes through `Recorder.audit`; a step's record (its arguments redacted and cut,
its model usage and cost, its span's attributes) is `Recorder.step`'s. A model step's usage is counted
against the execution's and the day's limits here, as it is audited.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.oe import spans
from agent_runtime.oe.audit import audit_value
from agent_runtime.oe.context import EngineContext
from agent_runtime.oe.limiter import Limiter
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.step_content import step_content
from agent_runtime.oe.step_plan import step_data
from agent_runtime.oe.store.base import AuditRecord, ExecutionRecord
from agent_runtime.oe.usage import PriceTable, cost, model_usage
from agent_runtime.protocol import ToolExecuteAnswer, ToolExecuteRequest


class Recorder:
    def __init__(self, ctx: EngineContext, *, prices: PriceTable, limiter: Limiter) -> None:
        self.ctx = ctx
        self.prices = prices
        self.limiter = limiter

    async def audit(
        self,
        record: ExecutionRecord,
        *,
        kind: str,
        decision: str,
        secrets: tuple[str, ...] = (),
        args: Any = None,
        **fields: Any,
    ) -> None:
        await self.ctx.store.append_audit(
            AuditRecord(
                execution_id=record.execution_id,
                agent=record.agent,
                workspace_id=record.workspace_id,
                kind=kind,  # type: ignore[arg-type]
                decision=decision,
                args=audit_value(args, secrets=secrets) if args is not None else None,
                at=self.ctx.clock(),
                **fields,
            )
        )
        metered = fields.get("usage")
        if kind == "llm" and metered is not None:
            await self.limiter.metered(record, tokens=metered.total_tokens, cost=fields.get("cost"))

    async def step(
        self,
        record: ExecutionRecord,
        call: ToolExecuteRequest,
        caller: AgentRegistration,
        *,
        decision: str,
        reason: str | None = None,
        route: str | None = None,
        answer: ToolExecuteAnswer | None = None,
        executed_args: dict[str, Any] | None = None,
        partial_text: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """One step's audit record (and its span's attributes)."""
        asked: Any = call.messages if call.is_llm else call.args
        if executed_args is not None and executed_args != call.args:
            # A reviewer edited them: the audit keeps what was asked and what ran.
            asked = {"requested": call.args, "executed": executed_args}
        metered = model_usage(answer.result if call.is_llm and answer and not answer.from_cache else None)
        usage, model = metered if metered is not None else (None, None)
        cost_of = cost(usage, model, self.prices.overridden_by(caller.prices)) if usage else None
        error_category = answer.error.category if answer and answer.error else None
        secrets = self.ctx.secrets.of(caller)
        if call.agent_name:
            # The subagent asking (LG-15); in `detail`, so the audit record's shape stays as it was.
            detail = {**(detail or {}), "agent_name": call.agent_name}
        spans.annotate_step(
            decision=decision,
            route=route,
            from_cache=bool(answer and answer.from_cache),
            status=answer.status if answer else None,
            error_category=error_category,
            model=model,
            usage=usage,
            cost=cost_of,
            arguments=asked,
            secrets=secrets,
        )
        await self.audit(
            record,
            kind="llm" if call.is_llm else "tool",
            step=call.step,
            tool=call.tool,
            llm_id=call.llm_id,
            args=asked,
            secrets=secrets,
            decision=decision,
            reason=reason,
            route=route,
            from_cache=bool(answer and answer.from_cache),
            status=answer.status if answer else None,
            error_category=error_category,
            duration_ms=answer.duration_ms if answer else None,
            pod_name=answer.pod_name if answer else None,
            usage=usage,
            model=model,
            cost=cost_of,
            # A stopped stream's text as its client saw it (issue 32), cut like any audited value.
            partial_text=audit_value(partial_text, secrets=secrets) if partial_text else None,
            **({"detail": detail} if detail is not None else {}),
        )

    def step_event(
        self,
        record: ExecutionRecord,
        caller: AgentRegistration,
        call: ToolExecuteRequest,
        answer: ToolExecuteAnswer,
    ) -> dict[str, Any]:
        """`step_finished`'s data: the status, and the result as the client may see it (issue 32)."""
        data = step_data(call, answer)
        streaming = self.ctx.streaming
        if streaming.step_results and record.step_results and answer.status in ("success", "error"):
            data.update(
                step_content(
                    result=answer.result,
                    error=answer.error,
                    secrets=self.ctx.secrets.all(caller),
                    max_bytes=streaming.step_result_max_bytes,
                )
            )
        return data
