"""The route stage of a step (issue 42): run the call its plan says, where it says.

A local tool goes back to the AER's call stack (nothing runs here: its `/tool/result` finishes the step);
another tool runs on the Tool Pod; a model call runs on the Tool Pod too, streamed as `llm_delta` events
when its client or its agent asked (issue 32). Nothing the OE knows as a secret is forwarded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agent_runtime.oe.children import Children
from agent_runtime.oe.context import EngineContext
from agent_runtime.oe.drains import DrainCaller
from agent_runtime.oe.llm_streams import LLM_DELTA, delta_data, streamed_llm_call, wants_stream
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.step_plan import (
    RUNS,
    Act,
    Plan,
    Ran,
    agent_field,
    llm_request,
    not_run,
    outcome_unknown,
    suspend_payload,
)
from agent_runtime.oe.store.base import ExecutionRecord
from agent_runtime.protocol import CallError, CallOutcome, InvokeLLMRequest, ToolExecuteRequest


class StepRoutes:
    def __init__(self, ctx: EngineContext, *, drains: DrainCaller, children: Children) -> None:
        self.ctx = ctx
        self.drains = drains
        self.children = children

    async def run(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest, plan: Plan
    ) -> Ran:
        if plan.act not in RUNS:
            return not_run(plan)
        if plan.act is Act.OUTCOME_UNKNOWN:
            unknown = outcome_unknown(call, plan)
            return Ran(unknown, outcome=unknown.outcome, route="none")
        if plan.act is Act.LOCAL:
            return Ran(plan, route="callback")
        route = "agent" if plan.act is Act.CHILD else "tool_pod"
        started: dict[str, Any] = {"tool": plan.tool, "route": route, **agent_field(call)}
        if plan.approved:
            started["approved"] = True
        await self.ctx.events.publish(call.execution_id, type="step_started", step=call.step, data=started)
        if plan.act is Act.CHILD:
            return await self._child(record, caller, call, plan)
        forwarded = self.ctx.secrets.redactor(caller)  # nothing the OE knows as a secret goes on
        partial: str | None = None
        if plan.act is Act.MODEL:
            if plan.llm is not None:
                request = InvokeLLMRequest.model_validate(forwarded.value(plan.llm))
            else:
                request = llm_request(call)
                request.messages = forwarded.value(request.messages)
            outcome, partial = await self._model_call(record, caller, call, request)
        else:
            outcome = await self.ctx.runtimes.execute_tool(
                caller,
                tool=plan.tool,
                arguments=forwarded.value(plan.args if plan.approved else call.args),
                execution_id=call.execution_id,
                step=call.step,
                user_id=record.user_id,
                org_id=record.org_id,
            )
        if outcome.status == "suspend":
            outcome = outcome.model_copy(update={"result": suspend_payload(call, outcome.result)})
        return Ran(plan, outcome=outcome, route="tool_pod", partial_text=partial)

    async def _child(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest, plan: Plan
    ) -> Ran:
        """An agentRef tool: the child execution the OE starts (or finds) and waits on (oe/children.py).
        The target is the registration's; the arguments are the child's input."""
        entry = caller.agent_ref(plan.tool)
        args = plan.args if plan.approved and plan.args is not None else call.args
        if entry is None or entry.agent is None:
            unknown = CallOutcome(
                status="error",
                error=CallError(category="agent_ref_unknown", explanation=f"{plan.tool!r} is no agentRef"),
            )
            return Ran(plan, outcome=unknown, route="agent")
        outcome, detail = await self.children.call(record, step=call.step, target=entry.agent, args=args)
        if outcome.status == "suspend":
            outcome = outcome.model_copy(update={"result": suspend_payload(call, outcome.result)})
        return Ran(plan, outcome=outcome, route="agent", detail=detail)

    async def _model_call(
        self,
        record: ExecutionRecord,
        caller: AgentRegistration,
        call: ToolExecuteRequest,
        request: InvokeLLMRequest,
    ) -> tuple[CallOutcome, str | None]:
        """The model call, streamed when asked; with the text a stopped stream had sent, for the audit."""
        if not wants_stream(record, call):
            return await self.ctx.runtimes.invoke_llm(caller, request), None
        # A cancel while the model streams must reach the Tool Pod now (it closes the provider's
        # request), not once the call has ended: note it as serving the execution before the call.
        await self.drains.served(
            call.execution_id, "tool", pod_name=None, address=None, fallback=caller.tool_url
        )
        streamed = await streamed_llm_call(
            self.ctx.runtimes,
            caller,
            request,
            redactor=self.ctx.secrets.redactor(caller),
            publish=self.delta_publisher(call),
        )
        return streamed.outcome, streamed.partial_text

    def delta_publisher(self, call: ToolExecuteRequest) -> Callable[[Any], Awaitable[None]]:
        async def publish(delta: Any) -> None:
            await self.ctx.events.publish(
                call.execution_id, type=LLM_DELTA, step=call.step, data=delta_data(delta)
            )

        return publish
