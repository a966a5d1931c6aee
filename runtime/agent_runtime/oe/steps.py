"""The step path (issue 42): one intercepted call (`/tool/execute`) and a local tool's `/tool/result`.

`Steps.execute` passes a call through each stage once, in order:

    owner -> replay -> policy -> route -> settle -> record

owner: the caller's own, running execution (a retry of the same step joins the first); replay: claim the
step in the cache and say what it holds (oe/step_plan.py `replayed`); policy: for a call the cache cannot
answer, the limits and the Agent's rules as a `Plan` (an approved call's plan is the reviewer's); route:
run it (oe/step_routes.py); settle: store its final outcome (or drop the claim of a refused call) and hold
a suspension; record: the audit record, the events, and a refusal's or divergence's end of the execution.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from agent_runtime.oe import spans
from agent_runtime.oe.children import Children
from agent_runtime.oe.conditions import facts as condition_facts
from agent_runtime.oe.context import EngineContext
from agent_runtime.oe.drains import DrainCaller
from agent_runtime.oe.errors import Conflict, NotFound
from agent_runtime.oe.executions import Executions
from agent_runtime.oe.limiter import Limiter, refusal_detail
from agent_runtime.oe.llm_streams import publish_cached, wants_stream
from agent_runtime.oe.policy import decide
from agent_runtime.oe.recorder import Recorder
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.replay import decide_replay, fingerprint
from agent_runtime.oe.runs import Runs
from agent_runtime.oe.step_plan import (
    Act,
    Plan,
    Ran,
    Replayed,
    agent_field,
    agent_suspend,
    allowed,
    answer_of,
    approved,
    cached,
    diverged,
    diverged_message,
    limited,
    replayed,
    reported_outcome,
    same_outcome,
    settled,
    unknown_tool,
    verdict,
)
from agent_runtime.oe.step_routes import StepRoutes
from agent_runtime.oe.store.base import ExecutionRecord, Review, StepRecord
from agent_runtime.oe.tool_lookup import ToolLookup
from agent_runtime.protocol import (
    AGENT_SUSPEND,
    REPLAY_DIVERGED,
    CallError,
    ExecutionState,
    ToolExecuteAnswer,
    ToolExecuteRequest,
    ToolResultRequest,
)

S = ExecutionState


@dataclass(frozen=True)
class Found:
    """What the replay stage found: a plan the cache settles (cached, diverged, a decided hold), an
    approved held call to run, or nothing final (`prior`: the unfinished claim, if any)."""

    plan: Plan | None = None
    approved: StepRecord | None = None
    review: Review | None = None
    prior: StepRecord | None = None


class Steps:
    def __init__(
        self,
        ctx: EngineContext,
        *,
        executions: Executions,
        recorder: Recorder,
        runs: Runs,
        tools: ToolLookup,
        limiter: Limiter,
        drains: DrainCaller,
        children: Children,
    ) -> None:
        self.ctx = ctx
        self.executions = executions
        self.recorder = recorder
        self.runs = runs
        self.tools = tools
        self.limiter = limiter
        self.drains = drains
        self.routes = StepRoutes(ctx, drains=drains, children=children)
        self._inflight: dict[tuple[str, int], asyncio.Future[ToolExecuteAnswer]] = {}

    def in_flight(self, execution_id: str) -> bool:
        """True while this OE waits on a call of the execution (its pod may not have answered yet)."""
        return any(key[0] == execution_id for key in self._inflight)

    async def execute(self, caller: AgentRegistration, call: ToolExecuteRequest) -> ToolExecuteAnswer:
        """Audit, police, replay and route one intercepted call; a retry of the same step joins the first."""
        record = await self.executions.owned(caller, call.execution_id)
        key = (call.execution_id, call.step)
        first = self._inflight.get(key)
        if first is not None:
            answer = await asyncio.shield(first)
            await self.recorder.step(record, call, caller, decision="joined", answer=answer)
            return answer
        future: asyncio.Future[ToolExecuteAnswer] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            with spans.step(step=call.step, tool=call.tool, llm_id=call.llm_id, is_llm=call.is_llm):
                answer = await self._stages(record, caller, call)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: joined callers re-raise it, nobody else must
            raise
        else:
            future.set_result(answer)
            return answer
        finally:
            del self._inflight[key]

    async def _stages(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest
    ) -> ToolExecuteAnswer:
        await self._running(record, caller, call)  # owner: the execution must still run
        found = await self._replay(record, caller, call)
        plan = await self._policy(record, caller, call, found)
        ran = await self.routes.run(record, caller, call, plan)
        # The step's outcome, the suspension it holds and its audit record: one transaction where the store
        # has them (PostgreSQL), so no crash between them leaves a step done without its audit record.
        async with self.ctx.store.atomic():
            answer = await self._settle(caller, call, ran)
            await self._audit(record, caller, call, ran, answer)
        await self._served(caller, call, ran)
        return await self._record(record, caller, call, ran, answer)

    # owner --------------------------------------------------------------------------------------------

    async def _running(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest
    ) -> None:
        if record.status is not S.RUNNING:
            await self.recorder.step(record, call, caller, decision="refused", reason=record.status.value)
            raise Conflict("execution_not_running", f"the execution is {record.status.value}")

    # replay -------------------------------------------------------------------------------------------

    async def _replay(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest
    ) -> Found:
        store = self.ctx.store
        fp = fingerprint(call)
        now = self.ctx.clock()
        existing = await store.claim_step(
            StepRecord(
                execution_id=call.execution_id,
                step=call.step,
                tool=call.tool,
                fingerprint=fp,
                owner=self.ctx.instance_id,
                run=record.runs,
                created_at=now,
                updated_at=now,
            )
        )
        replay = decide_replay(fp, existing)
        review = record.review_at(call.step)
        kind = replayed(replay, review)
        if kind is Replayed.DIVERGED:
            return Found(plan=diverged(replay.record))
        if kind is Replayed.CACHED:
            assert replay.record is not None and replay.record.outcome is not None
            return Found(plan=cached(replay.record.outcome))
        if kind is Replayed.DECIDED:
            assert replay.record is not None and review is not None
            return await self._decided(record, call, replay.record, review)
        if replay.record is not None:
            # Claimed, never finished: its OE died mid-call, a retry lost its answer, or an approved call
            # is running. Nothing here runs a call twice: the Tool Pod answers a call it already ran (or
            # is running) at this (execution, step) from its memory, and a local tool claimed by an
            # earlier run is never run again.
            await store.reset_step(call.execution_id, call.step, owner=self.ctx.instance_id, at=now)
        if kind is Replayed.APPROVED_RUNNING:
            return Found(approved=replay.record, review=review)
        await store.note_step(call.execution_id, call.step, at=now)
        return Found(prior=replay.record)

    async def _decided(
        self, record: ExecutionRecord, call: ToolExecuteRequest, held: StepRecord, review: Review
    ) -> Found:
        """The replay reached a suspended step a human has decided: its final outcome, or the approved
        call to run (once: the replica that reopens the step runs it)."""
        plan = settled(held, review)
        if plan is not None:
            return Found(plan=plan)
        store = self.ctx.store
        now = self.ctx.clock()
        if await store.reopen_step(
            call.execution_id, call.step, owner=self.ctx.instance_id, run=record.runs, at=now
        ):
            return Found(approved=held.model_copy(update={"run": record.runs}), review=review)
        # Another replica (or an earlier attempt) reopened it first.
        current = await store.get_step(call.execution_id, call.step)
        if current is None:
            raise Conflict("step_lost", f"step {call.step} disappeared while it was being approved")
        if current.state == "done" and current.outcome is not None:
            return Found(plan=cached(current.outcome))
        return Found(approved=current, review=review)

    # policy -------------------------------------------------------------------------------------------

    async def _policy(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest, found: Found
    ) -> Plan:
        if found.plan is not None:
            return found.plan  # the cache answers: the policy is not asked again
        if found.approved is not None:
            assert found.review is not None
            # The reviewer's decision is this call's policy.
            entry = None if call.is_llm else await self.tools.entry(caller, found.approved.tool)
            return approved(call, found.approved, found.review, entry, runs=record.runs)
        if call.tool == AGENT_SUSPEND:
            return agent_suspend(call)
        entry = None if call.is_llm else await self.tools.entry(caller, call.tool)
        if entry is None and not call.is_llm:
            return unknown_tool(call.tool)
        usage = await self.limiter.count_call(caller, record, is_llm=call.is_llm)
        on_exceed = self.limiter.limits_of(caller).on_exceed
        if (refusal := await self.limiter.check_call(caller, record, usage, is_llm=call.is_llm)) is not None:
            return limited(call, refusal, on_exceed=on_exceed)
        decision = decide(
            caller.policy,
            tool=call.tool,
            sensitive=bool(entry and entry.sensitive),
            facts=condition_facts(
                tool=call.tool,
                args=call.args if not call.is_llm else {"llm_id": call.llm_id or "default"},
                agent=caller.agent,
                user=record.user_id,
                step=call.step,
                usage=usage,
            ),
        )
        held_or_denied = verdict(call, decision, now=self.ctx.clock())
        if held_or_denied is not None:
            return held_or_denied
        if not call.is_llm and (refusal := await self.limiter.take_rate(caller, tool=call.tool)) is not None:
            return limited(call, refusal, on_exceed=on_exceed)
        return allowed(call, entry, prior=found.prior, runs=record.runs)

    # settle -------------------------------------------------------------------------------------------

    async def _settle(
        self, caller: AgentRegistration, call: ToolExecuteRequest, ran: Ran
    ) -> ToolExecuteAnswer | None:
        """Store the step's final outcome (or drop the claim of a call that did not run) and hold a
        suspension; the answer the runtime gets (none for a diverged replay)."""
        plan = ran.plan
        store = self.ctx.store
        if plan.act is Act.DIVERGED:
            return None
        if plan.act in (Act.DENY, Act.REFUSE):
            # Not cached: a replay asks the policy again, which may have changed while the run was suspended.
            await store.delete_step(call.execution_id, call.step)
            return ToolExecuteAnswer(step=call.step, proceed=False, reason=plan.reason)
        if plan.act is Act.LOCAL:
            return ToolExecuteAnswer(step=call.step, proceed=True, route_to="callback", args=plan.args)
        assert ran.outcome is not None
        if plan.act is Act.CACHED:
            if ran.outcome.status == "suspend":
                # A replay that reaches a suspension nobody decided yet suspends again, on the same payload.
                await self.runs.hold(call.execution_id, ran.outcome.result)
            return answer_of(call.step, ran.outcome, from_cache=True)
        outcome = self.ctx.secrets.scrubbed(ran.outcome, caller)
        await store.finish_step(call.execution_id, call.step, outcome, at=self.ctx.clock())
        if outcome.status == "suspend":
            await self.runs.hold(call.execution_id, outcome.result)
        answer = answer_of(call.step, outcome, from_cache=False)
        if plan.args is not None and plan.args != call.args:
            # A reviewer's edit: the runtime puts the arguments that ran in the agent's state (issue 31).
            answer = answer.model_copy(update={"args": plan.args})
        return answer

    async def _served(self, caller: AgentRegistration, call: ToolExecuteRequest, ran: Ran) -> None:
        """The pod that answered served the execution: a drain of it goes there too (Decision 8). After the
        step's transaction: the drains remember what they noted, which a rollback would not undo."""
        outcome = ran.outcome
        unsettled = (Act.DIVERGED, Act.DENY, Act.REFUSE, Act.LOCAL, Act.CACHED)  # no outcome stored
        if ran.plan.act in unsettled or outcome is None or ran.route != "tool_pod":
            return
        if outcome.pod_name or outcome.pod_address:
            await self.drains.served(
                call.execution_id,
                "tool",
                pod_name=outcome.pod_name,
                address=outcome.pod_address,
                fallback=caller.tool_url,
            )

    # record -------------------------------------------------------------------------------------------

    async def _audit(
        self,
        record: ExecutionRecord,
        caller: AgentRegistration,
        call: ToolExecuteRequest,
        ran: Ran,
        answer: ToolExecuteAnswer | None,
    ) -> None:
        """The step's audit record (in the step's transaction)."""
        plan = ran.plan
        if plan.act is Act.DIVERGED:
            message = diverged_message(call, plan.recorded)
            await self.recorder.step(record, call, caller, decision="diverged", reason=message, route="none")
            return
        assert answer is not None
        if plan.act is Act.REFUSE:
            refusal = plan.refusal
            assert refusal is not None
            # A limit reached (issue 34): audited with the limit and the figure, and the execution fails
            # with `budget_exceeded` or `rate_limited` (onExceed: fail).
            await self.recorder.audit(
                record,
                kind="llm" if call.is_llm else "tool",
                step=call.step,
                tool=call.tool,
                llm_id=call.llm_id,
                decision=plan.decision,
                reason=refusal.message,
                route="none",
                error_category=refusal.category,
                detail=refusal_detail(refusal),
            )
            return
        await self.recorder.step(
            record,
            call,
            caller,
            decision=plan.decision,
            reason=plan.reason if plan.act is Act.DENY else None,
            route=ran.route,
            answer=answer,
            executed_args=plan.args,
            partial_text=ran.partial_text,
            # A call held at a limit (onExceed: suspend) is audited with the limit and the figure.
            detail=refusal_detail(plan.refusal) if plan.refusal is not None else ran.detail,
        )

    async def _record(
        self,
        record: ExecutionRecord,
        caller: AgentRegistration,
        call: ToolExecuteRequest,
        ran: Ran,
        answer: ToolExecuteAnswer | None,
    ) -> ToolExecuteAnswer:
        """The step's events, once its transaction is in; a refused or diverged step ends the execution."""
        plan = ran.plan
        events = self.ctx.events
        if plan.act is Act.DIVERGED:
            message = diverged_message(call, plan.recorded)
            await self.runs.fail(record, CallError(category=REPLAY_DIVERGED, explanation=message))
            raise Conflict(REPLAY_DIVERGED, message)
        assert answer is not None
        if plan.act is Act.REFUSE:
            refusal = plan.refusal
            assert refusal is not None
            await self.runs.fail(record, CallError(category=refusal.category, explanation=refusal.message))
            return answer
        if plan.act is Act.DENY:
            data = {"tool": call.tool, "status": "denied", **agent_field(call)}
            await events.publish(call.execution_id, type="step_finished", step=call.step, data=data)
            return answer
        if plan.act is Act.LOCAL:
            data = {"tool": call.tool, "route": "callback", **agent_field(call)}
            await events.publish(call.execution_id, type="step_started", step=call.step, data=data)
            return answer
        if plan.act is Act.CACHED and wants_stream(record, call):
            # A replayed model step: its cached final message as one delta (issue 32).
            assert ran.outcome is not None
            await publish_cached(
                ran.outcome,
                step=call.step,
                publish=self.routes.delta_publisher(call),
                redactor=self.ctx.secrets.redactor(caller),
            )
        await events.publish(
            call.execution_id,
            type="step_finished",
            step=call.step,
            data=self.recorder.step_event(record, caller, call, answer),
        )
        return answer

    # a local tool's result ----------------------------------------------------------------------------

    async def tool_result(self, caller: AgentRegistration, report: ToolResultRequest) -> None:
        """Store a local tool's outcome as its step's final one; the same report twice is a no-op."""
        record = await self.executions.owned(caller, report.execution_id)
        store = self.ctx.store
        step = await store.get_step(report.execution_id, report.step)
        if step is None:
            raise NotFound(f"no step {report.step} in execution {report.execution_id!r}")
        outcome = self.ctx.secrets.scrubbed(
            reported_outcome(
                status=report.status,
                result=report.result,
                error=report.error,
                duration_ms=report.duration_ms,
                step=report.step,
                tool=step.tool,
            ),
            caller,
        )
        if step.state == "done":
            if step.outcome is not None and same_outcome(step.outcome, outcome):
                return
            await self.recorder.audit(
                record, kind="tool", step=report.step, tool=step.tool, decision="conflict", status="refused"
            )
            raise Conflict("step_final", f"step {report.step} already has a final outcome")
        entry = await self.tools.entry(caller, step.tool)
        if entry is None or entry.location != "local":
            raise Conflict(
                "not_a_callback_step", f"step {report.step} ({step.tool}) was not routed to the AER"
            )
        answer = answer_of(report.step, outcome, from_cache=False)
        async with store.atomic():  # the outcome, its suspension and its audit record: all or none
            await store.finish_step(report.execution_id, report.step, outcome, at=self.ctx.clock())
            if outcome.status == "suspend":
                await self.runs.hold(report.execution_id, outcome.result)
            await self.recorder.audit(
                record,
                kind="tool",
                step=report.step,
                tool=step.tool,
                decision="callback_result",
                route="callback",
                status=outcome.status,
                error_category=outcome.error.category if outcome.error else None,
                duration_ms=outcome.duration_ms,
                args=None,
            )
        await self.ctx.events.publish(
            report.execution_id,
            type="step_finished",
            step=report.step,
            data={"tool": step.tool, "status": answer.status, "from_cache": False},
        )
