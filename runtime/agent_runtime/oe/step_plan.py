"""What one `/tool/execute` step does, as pure functions of what the stages found (issue 42).

The step pipeline (oe/steps.py) passes each call through its stages once, in order: owner -> replay ->
policy -> route -> settle -> record. Each stage does its I/O and hands what it found to a function here,
which says what happens next as a `Plan`: answer from the cache, fail on a diverged replay, deny, refuse
a limit, finish with an outcome known without running anything (a hold, a decided suspension, an outcome
that cannot be known), or run the call (back to the AER's call stack, on the Tool Pod, or as a model call).
Nothing here reads the store or talks to a runtime; the unit tests call these functions directly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Protocol

from agent_runtime.oe.deadlines import stamp
from agent_runtime.oe.holds import APPROVAL_REQUIRED, CHILD, agent_hold_kind, decided_answer
from agent_runtime.oe.limit_holds import LIMIT, limit_hold, refusal_of
from agent_runtime.oe.limits import Refusal
from agent_runtime.oe.policy import Decision, Outcome
from agent_runtime.oe.replay import Replay, ReplayDecision
from agent_runtime.oe.store.base import Review, StepRecord
from agent_runtime.protocol import (
    AGENT_SUSPEND,
    OUTCOME_UNKNOWN,
    REJECTED_BY_REVIEWER,
    CallError,
    CallOutcome,
    InvokeLLMRequest,
    ToolExecuteAnswer,
    ToolExecuteRequest,
)


class Located(Protocol):
    """Where a tool runs, as the registration (or the AER's list) says: `local` or `remote`."""

    @property
    def location(self) -> str: ...


class Replayed(StrEnum):
    """What the replay cache makes of a step."""

    NEW = "new"  # nothing final is held: the policy decides (a claimed, unfinished step included)
    CACHED = "cached"  # the recorded final outcome answers it
    DIVERGED = "diverged"  # another call than the recorded one: fail the execution
    DECIDED = "decided"  # a held step a human has decided since: settle it (reviewed, rejected or run)
    APPROVED_RUNNING = (
        "approved_running"  # an approved call claimed but not finished: run it (the pods dedupe)
    )


def replayed(replay: ReplayDecision, review: Review | None) -> Replayed:
    """The replay stage's verdict from the cache's decision and the review at the step (if any)."""
    if replay.kind is Replay.DIVERGED:
        return Replayed.DIVERGED
    held = replay.record.outcome if replay.record is not None else None
    suspended = held is not None and held.status == "suspend" and review is not None
    if replay.kind is Replay.CACHED:
        return Replayed.DECIDED if suspended else Replayed.CACHED
    if replay.kind is Replay.IN_PROGRESS and suspended:
        return Replayed.APPROVED_RUNNING
    return Replayed.NEW


class Act(StrEnum):
    """What the step does once the policy (or the replay) has spoken."""

    CACHED = "cached"  # answer `outcome` from the cache
    DIVERGED = "diverged"  # audit, fail the execution, refuse with 409
    DENY = "deny"  # the policy denies: proceed=false with `reason`
    REFUSE = "refuse"  # a limit reached: proceed=false, the execution fails with the refusal's category
    FINISH = "finish"  # `outcome` is known without running anything
    LOCAL = "local"  # a local tool: back to the AER's call stack; its /tool/result finishes it
    TOOL_POD = "tool_pod"  # run `tool` with `args` on the Tool Pod
    CHILD = "child"  # an agentRef tool: the OE starts (or finds) the child execution and waits on it
    MODEL = "model"  # run the model call (the call's own request, or the held `llm` one once approved)
    OUTCOME_UNKNOWN = "outcome_unknown"  # a local tool a lost run was running: never run again


# The acts that run something: the route stage's work.
RUNS = frozenset({Act.LOCAL, Act.TOOL_POD, Act.MODEL, Act.OUTCOME_UNKNOWN, Act.CHILD})


@dataclass(frozen=True)
class Plan:
    """The step's course, decided before the route stage runs anything."""

    act: Act
    decision: str  # the audit record's decision
    outcome: CallOutcome | None = None  # CACHED, FINISH: the step's outcome
    reason: str | None = None  # DENY, DIVERGED: why
    refusal: Refusal | None = None  # REFUSE, a limit hold: the limit reached
    tool: str = ""  # the tool that runs (the held one for an approved call)
    args: dict[str, Any] | None = None  # the arguments that run, when a reviewer approved them
    llm: dict[str, Any] | None = None  # a held model request, run once approved
    approved: bool = False  # a reviewer approved this call
    prior_run: int | None = None  # OUTCOME_UNKNOWN: the run that was running it
    recorded: StepRecord | None = None  # DIVERGED: what the cache holds at the step


@dataclass(frozen=True)
class Ran:
    """What the route stage did with a plan: the outcome it got (none for a call routed back to the AER),
    where the call went (the audit's `route`), and a stopped model stream's text."""

    plan: Plan
    outcome: CallOutcome | None = None
    route: str = "none"
    partial_text: str | None = None
    detail: dict[str, Any] | None = None  # for the audit record: the child execution an agentRef started


def not_run(plan: Plan) -> Ran:
    """A plan the route stage has nothing to run for: a cached answer, a denial, a hold."""
    return Ran(plan, outcome=plan.outcome, route="cache" if plan.act is Act.CACHED else "none")


def diverged(recorded: StepRecord | None) -> Plan:
    return Plan(Act.DIVERGED, decision="diverged", recorded=recorded)


def diverged_message(call: ToolExecuteRequest, recorded: StepRecord | None) -> str:
    was = recorded.tool if recorded is not None else "?"
    return (
        f"step {call.step} replayed as {call.tool!r} with other arguments than the recorded {was!r} "
        "call; an agent must make the same calls in the same order when it is resumed"
    )


def cached(outcome: CallOutcome) -> Plan:
    return Plan(Act.CACHED, decision="cached", outcome=outcome)


def deny(reason: str) -> Plan:
    return Plan(Act.DENY, decision="deny", reason=reason)


def unknown_tool(tool: str) -> Plan:
    return deny(f"unknown tool {tool!r}: the Agent has no such tool")


def refuse(refusal: Refusal) -> Plan:
    return Plan(Act.REFUSE, decision="refused", reason=refusal.message, refusal=refusal)


def limited(call: ToolExecuteRequest, refusal: Refusal, *, on_exceed: str) -> Plan:
    """A limit reached before the call runs: refused (the execution fails, onExceed: fail) or held for a
    reviewer who may raise it for this execution (onExceed: suspend)."""
    if on_exceed != "suspend":
        return refuse(refusal)
    llm = llm_request(call).model_dump(mode="json") if call.is_llm else None
    held = limit_hold(call, refusal, llm=llm)
    outcome = CallOutcome(status="suspend", result=held)
    return Plan(Act.FINISH, decision="limit", outcome=outcome, refusal=refusal)


def agent_suspend(call: ToolExecuteRequest) -> Plan:
    """`app.suspend` in agent code: held at its step like an approval; answered later by the human."""
    reason = call.args.get("reason")
    held = {
        "kind": agent_hold_kind(call.args),
        "reason": reason if isinstance(reason, str) else "suspended",
        "payload": call.args.get("payload"),
        "step": call.step,
        "tool": AGENT_SUSPEND,
    }
    return Plan(Act.FINISH, decision="suspend", outcome=CallOutcome(status="suspend", result=held))


def verdict(call: ToolExecuteRequest, decision: Decision, *, now: float) -> Plan | None:
    """The policy's answer as a plan: a denial, a call held for approval (with its deadline), or None
    (allowed: the rate limit and the route come next)."""
    if decision.outcome is Outcome.DENY:
        return deny(decision.reason)
    if decision.outcome is not Outcome.APPROVAL:
        return None
    held: dict[str, Any] = {
        "kind": APPROVAL_REQUIRED,
        "tool": call.tool,
        "args": call.args,
        "step": call.step,
        "reason": decision.reason,
    }
    held = stamp(held, decision.approval, now=now)  # its deadline, when one is set
    if call.is_llm:
        held["llm"] = llm_request(call).model_dump(mode="json")
    return Plan(Act.FINISH, decision="approval", outcome=CallOutcome(status="suspend", result=held))


def allowed(call: ToolExecuteRequest, entry: Located | None, *, prior: StepRecord | None, runs: int) -> Plan:
    """Where an allowed call runs: a local tool back in the AER (unless a lost run was running it), the
    model on the Tool Pod, any other tool on the Tool Pod."""
    if entry is not None and entry.location == "local":
        if prior is not None and prior.run < runs:
            return Plan(Act.OUTCOME_UNKNOWN, decision="outcome_unknown", tool=call.tool, prior_run=prior.run)
        return Plan(Act.LOCAL, decision="allow", tool=call.tool)
    if call.is_llm:
        return Plan(Act.MODEL, decision="allow", tool=call.tool)
    if entry is not None and entry.location == "agent":
        return Plan(Act.CHILD, decision="allow", tool=call.tool)
    return Plan(Act.TOOL_POD, decision="allow", tool=call.tool)


def settled(held_step: StepRecord, review: Review) -> Plan | None:
    """A held step a human decided: its final outcome (the decision itself for `app.suspend`, a
    reviewer's error for a rejected call), or None when an approved call must now run."""
    assert held_step.outcome is not None
    held = held_step.outcome.result if isinstance(held_step.outcome.result, dict) else {}
    if held.get("kind") == LIMIT and review.decision == "rejected":
        # Not raised: the execution fails with the limit's category, as onExceed: fail would have.
        refusal = refusal_of(held, notes=review.reviewer_notes)
        return Plan(Act.REFUSE, decision="rejected", reason=refusal.message, refusal=refusal)
    if held.get("kind") == CHILD:
        return None  # the child ended: the call runs again and finds the child's answer
    if held.get("kind") not in (APPROVAL_REQUIRED, LIMIT):
        # `app.suspend` (in a tool or in agent code): the step's answer is the human's decision.
        answer = decided_answer(
            kind=review.kind,
            decision=review.decision,
            reviewer_notes=review.reviewer_notes,
            value=review.value,
        )
        return Plan(Act.FINISH, decision="reviewed", outcome=CallOutcome(status="success", result=answer))
    if review.decision == "rejected":
        note = review.reviewer_notes or "no notes"
        rejected = CallOutcome(
            status="error",
            error=CallError(category=REJECTED_BY_REVIEWER, explanation=f"rejected by reviewer: {note}"),
        )
        return Plan(Act.FINISH, decision="rejected", outcome=rejected)
    return None


def approved(
    call: ToolExecuteRequest, held_step: StepRecord, review: Review, entry: Located | None, *, runs: int
) -> Plan:
    """The call a reviewer approved, with the arguments the reviewer sent (or the held ones)."""
    assert held_step.outcome is not None
    held = held_step.outcome.result if isinstance(held_step.outcome.result, dict) else {}
    args = review.args if review.args is not None else dict(held.get("args") or {})
    common = {"decision": "approved", "tool": held_step.tool, "args": args, "approved": True}
    if entry is not None and entry.location == "local":
        if held_step.run < runs:
            return Plan(
                Act.OUTCOME_UNKNOWN, decision="outcome_unknown", tool=call.tool, prior_run=held_step.run
            )
        return Plan(Act.LOCAL, **common)
    if held.get("llm"):
        return Plan(Act.MODEL, llm=held["llm"], **common)
    if entry is not None and entry.location == "agent":
        return Plan(Act.CHILD, **common)
    return Plan(Act.TOOL_POD, **common)


def outcome_unknown(call: ToolExecuteRequest, plan: Plan) -> Plan:
    """A local tool an earlier run was running when that run was lost: it may have taken effect (the OE
    cannot tell), so it is not run again; the model sees a tool error and the turn goes on."""
    unknown = CallOutcome(
        status="error",
        error=CallError(
            category=OUTCOME_UNKNOWN,
            explanation=(
                f"tool {call.tool!r} was running in the AER at step {call.step} (run {plan.prior_run}) when "
                "that run was lost; it may have taken effect, so it is not run again"
            ),
        ),
    )
    return replace(plan, act=Act.FINISH, outcome=unknown)


def suspend_payload(call: ToolExecuteRequest, result: Any) -> dict[str, Any]:
    """A tool's suspension, marked with its step so a resume can answer exactly that step."""
    payload = dict(result) if isinstance(result, dict) else {"reason": str(result)}
    payload.setdefault("kind", "suspend")
    payload.update(step=call.step, tool=call.tool)
    return payload


def answer_of(step: int, outcome: CallOutcome, *, from_cache: bool) -> ToolExecuteAnswer:
    return ToolExecuteAnswer(
        step=step,
        proceed=True,
        status=outcome.status,
        result=outcome.result,
        error=outcome.error,
        from_cache=from_cache,
        duration_ms=outcome.duration_ms,
        pod_name=outcome.pod_name,
    )


def agent_field(call: ToolExecuteRequest) -> dict[str, str]:
    """The calling agent of a multi-agent graph (LG-15) for an event's data, when the call names one."""
    return {"agent_name": call.agent_name} if call.agent_name else {}


def step_data(call: ToolExecuteRequest, answer: ToolExecuteAnswer) -> dict[str, Any]:
    data: dict[str, Any] = {"tool": call.tool, "status": answer.status, "from_cache": answer.from_cache}
    data.update(agent_field(call))
    if answer.error is not None:
        data["error_category"] = answer.error.category
    return data


def same_outcome(a: CallOutcome, b: CallOutcome) -> bool:
    return a.status == b.status and a.result == b.result and a.error == b.error


def llm_request(call: ToolExecuteRequest) -> InvokeLLMRequest:
    return InvokeLLMRequest(
        llm_id=call.llm_id or "default",
        messages=call.messages or [],
        tools=call.tools,
        options=call.options,
        execution_id=call.execution_id,
        step=call.step,
    )


def reported_outcome(
    *, status: str, result: Any, error: CallError | None, duration_ms: float | None, step: int, tool: str
) -> CallOutcome:
    """A local tool's `/tool/result` as the step's outcome; a suspension is marked with its step."""
    if status == "suspend":
        result = {**(result if isinstance(result, dict) else {}), "kind": "suspend"}
        result.update(step=step, tool=tool)
    return CallOutcome(status=status, result=result, error=error, duration_ms=duration_ms or 0.0)  # type: ignore[arg-type]
