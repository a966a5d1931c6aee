"""A step's pure decisions (oe/step_plan.py, issue 42): what the replay makes of the cache, what the
policy's verdict and the tool's location make of a call, what a decided hold answers and what an
approval runs."""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime.oe.holds import APPROVAL_REQUIRED
from agent_runtime.oe.limits import Refusal
from agent_runtime.oe.policy import ApprovalSettings, Decision, Outcome
from agent_runtime.oe.registration import ToolEntry
from agent_runtime.oe.replay import Replay, ReplayDecision
from agent_runtime.oe.step_plan import (
    RUNS,
    Act,
    Replayed,
    agent_suspend,
    allowed,
    approved,
    not_run,
    outcome_unknown,
    refuse,
    replayed,
    reported_outcome,
    settled,
    suspend_payload,
    verdict,
)
from agent_runtime.oe.store.base import Review, StepRecord
from agent_runtime.protocol import (
    AGENT_SUSPEND,
    INVOKE_LLM,
    OUTCOME_UNKNOWN,
    REJECTED_BY_REVIEWER,
    CallOutcome,
    ToolExecuteRequest,
)

LOCAL = ToolEntry(name="lookup", location="local")
REMOTE = ToolEntry(name="lookup", location="remote")


def call(tool: str = "lookup", **args: Any) -> ToolExecuteRequest:
    return ToolExecuteRequest(execution_id="e1", step=3, tool=tool, args=dict(args))


def llm_call() -> ToolExecuteRequest:
    return ToolExecuteRequest(
        execution_id="e1",
        step=3,
        tool=INVOKE_LLM,
        llm_id="main",
        messages=[{"type": "human", "content": "hi"}],
    )


def step(
    *, state: str = "done", outcome: CallOutcome | None = None, run: int = 1, tool: str = "lookup"
) -> StepRecord:
    return StepRecord(
        execution_id="e1",
        step=3,
        tool=tool,
        fingerprint="fp",
        state=state,  # type: ignore[arg-type]
        outcome=outcome,
        run=run,
        created_at=0,
        updated_at=0,
    )


SUCCESS = CallOutcome(status="success", result={"x": 1})
HELD_APPROVAL = CallOutcome(
    status="suspend", result={"kind": APPROVAL_REQUIRED, "tool": "lookup", "args": {"n": 1}, "step": 3}
)
HELD_SUSPEND = CallOutcome(status="suspend", result={"kind": "suspend", "reason": "ask", "step": 3})


def review(decision: str = "approved", **fields: Any) -> Review:
    return Review(step=3, kind=fields.pop("kind", APPROVAL_REQUIRED), decision=decision, at=1.0, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("replay", "with_review", "expected"),
    [
        (ReplayDecision(Replay.NEW), False, Replayed.NEW),
        (ReplayDecision(Replay.NEW), True, Replayed.NEW),
        (ReplayDecision(Replay.DIVERGED, step(outcome=SUCCESS)), True, Replayed.DIVERGED),
        (ReplayDecision(Replay.CACHED, step(outcome=SUCCESS)), False, Replayed.CACHED),
        # A decided step that did not suspend is an ordinary cached answer.
        (ReplayDecision(Replay.CACHED, step(outcome=SUCCESS)), True, Replayed.CACHED),
        # A hold nobody decided yet is answered from the cache (it suspends again).
        (ReplayDecision(Replay.CACHED, step(outcome=HELD_APPROVAL)), False, Replayed.CACHED),
        (ReplayDecision(Replay.CACHED, step(outcome=HELD_APPROVAL)), True, Replayed.DECIDED),
        (ReplayDecision(Replay.IN_PROGRESS, step(state="in_progress")), True, Replayed.NEW),
        (
            ReplayDecision(Replay.IN_PROGRESS, step(state="in_progress", outcome=HELD_APPROVAL)),
            False,
            Replayed.NEW,
        ),
        (
            ReplayDecision(Replay.IN_PROGRESS, step(state="in_progress", outcome=HELD_APPROVAL)),
            True,
            Replayed.APPROVED_RUNNING,
        ),
    ],
)
def test_replayed(replay: ReplayDecision, with_review: bool, expected: Replayed) -> None:
    assert replayed(replay, review() if with_review else None) is expected


@pytest.mark.parametrize(
    ("entry", "is_llm", "prior_run", "runs", "act"),
    [
        (LOCAL, False, None, 1, Act.LOCAL),
        (LOCAL, False, 2, 2, Act.LOCAL),  # claimed by this very run (a retry): routed back again
        (LOCAL, False, 1, 2, Act.OUTCOME_UNKNOWN),  # a lost run was running it: never run twice
        (REMOTE, False, None, 1, Act.TOOL_POD),
        (REMOTE, False, 1, 2, Act.TOOL_POD),  # the Tool Pod answers a call it ran from its memory
        (None, True, None, 1, Act.MODEL),
        (None, True, 1, 2, Act.MODEL),
    ],
)
def test_allowed_route(
    entry: ToolEntry | None, is_llm: bool, prior_run: int | None, runs: int, act: Act
) -> None:
    prior = step(state="in_progress", run=prior_run) if prior_run is not None else None
    plan = allowed(llm_call() if is_llm else call(), entry, prior=prior, runs=runs)
    assert plan.act is act
    assert plan.decision == ("outcome_unknown" if act is Act.OUTCOME_UNKNOWN else "allow")
    assert plan.act in RUNS and plan.args is None and not plan.approved


@pytest.mark.parametrize(
    ("outcome", "approval", "act", "kind"),
    [
        (Outcome.ALLOW, None, None, None),
        (Outcome.DENY, None, Act.DENY, None),
        (Outcome.APPROVAL, None, Act.FINISH, APPROVAL_REQUIRED),
        (
            Outcome.APPROVAL,
            ApprovalSettings(timeout="30m", on_timeout="approve"),
            Act.FINISH,
            APPROVAL_REQUIRED,
        ),
    ],
)
def test_verdict(
    outcome: Outcome, approval: ApprovalSettings | None, act: Act | None, kind: str | None
) -> None:
    plan = verdict(call(amount=20000), Decision(outcome, "because", approval=approval), now=100.0)
    if act is None:
        assert plan is None
        return
    assert plan is not None and plan.act is act
    if act is Act.DENY:
        assert plan.reason == "because" and plan.decision == "deny" and plan.outcome is None
        return
    assert plan.decision == "approval" and plan.outcome is not None and plan.outcome.status == "suspend"
    held = plan.outcome.result
    assert held["kind"] == kind and held["args"] == {"amount": 20000} and held["step"] == 3
    assert held["reason"] == "because"
    if approval is None:
        assert "deadline" not in held
    else:
        assert held["deadline"] == 100.0 + 1800 and held["on_timeout"] == "approve"


def test_a_held_model_call_keeps_its_request_to_run_once_approved() -> None:
    plan = verdict(llm_call(), Decision(Outcome.APPROVAL, "sensitive"), now=0.0)
    assert plan is not None and plan.outcome is not None
    assert plan.outcome.result["llm"]["llm_id"] == "main"
    assert plan.outcome.result["llm"]["messages"] == [{"type": "human", "content": "hi"}]


@pytest.mark.parametrize(
    ("held", "decision", "extra", "act", "expected"),
    [
        # app.suspend: the step's answer is the human's decision, approved or rejected.
        (HELD_SUSPEND, "approved", {"kind": "suspend", "reviewer_notes": "ok"}, Act.FINISH, "reviewed"),
        (HELD_SUSPEND, "rejected", {"kind": "suspend"}, Act.FINISH, "reviewed"),
        # A held call: rejected is a reviewer's error, approved runs it (None).
        (HELD_APPROVAL, "rejected", {"reviewer_notes": "too much"}, Act.FINISH, "rejected"),
        (HELD_APPROVAL, "approved", {}, None, None),
    ],
)
def test_settled(
    held: CallOutcome, decision: str, extra: dict[str, Any], act: Act | None, expected: str | None
) -> None:
    plan = settled(step(outcome=held), review(decision, **extra))
    if act is None:
        assert plan is None
        return
    assert plan is not None and plan.act is act and plan.decision == expected
    assert plan.outcome is not None
    if expected == "rejected":
        assert plan.outcome.status == "error" and plan.outcome.error is not None
        assert plan.outcome.error.category == REJECTED_BY_REVIEWER
        assert plan.outcome.error.explanation == "rejected by reviewer: too much"
    else:
        assert plan.outcome.status == "success"
        assert plan.outcome.result["decision"] == decision


@pytest.mark.parametrize(
    ("entry", "held", "edited", "held_run", "runs", "act", "args"),
    [
        (REMOTE, HELD_APPROVAL, None, 1, 2, Act.TOOL_POD, {"n": 1}),
        (REMOTE, HELD_APPROVAL, {"n": 5}, 1, 2, Act.TOOL_POD, {"n": 5}),
        (LOCAL, HELD_APPROVAL, None, 2, 2, Act.LOCAL, {"n": 1}),
        (LOCAL, HELD_APPROVAL, {"n": 5}, 2, 2, Act.LOCAL, {"n": 5}),
        (LOCAL, HELD_APPROVAL, None, 1, 2, Act.OUTCOME_UNKNOWN, None),
        (
            None,
            CallOutcome(status="suspend", result={"kind": APPROVAL_REQUIRED, "llm": {"llm_id": "m"}}),
            None,
            1,
            2,
            Act.MODEL,
            {},
        ),
    ],
)
def test_approved(
    entry: ToolEntry | None,
    held: CallOutcome,
    edited: dict[str, Any] | None,
    held_run: int,
    runs: int,
    act: Act,
    args: dict[str, Any] | None,
) -> None:
    plan = approved(call(n=1), step(outcome=held, run=held_run), review(args=edited), entry, runs=runs)
    assert plan.act is act
    assert plan.args == args
    if act is Act.OUTCOME_UNKNOWN:
        assert plan.decision == "outcome_unknown" and plan.prior_run == held_run
        return
    assert plan.decision == "approved" and plan.approved and plan.tool == "lookup"
    assert (plan.llm is not None) == (act is Act.MODEL)


def test_outcome_unknown_names_the_lost_run() -> None:
    plan = outcome_unknown(call(), allowed(call(), LOCAL, prior=step(state="in_progress", run=1), runs=2))
    assert plan.act is Act.FINISH and plan.decision == "outcome_unknown"
    assert plan.outcome is not None and plan.outcome.error is not None
    assert plan.outcome.error.category == OUTCOME_UNKNOWN
    assert "(run 1)" in plan.outcome.error.explanation


@pytest.mark.parametrize(
    ("args", "kind", "reason"),
    [
        ({"reason": "check", "payload": {"a": 1}}, "suspend", "check"),
        ({"kind": "interrupt", "payload": 5}, "interrupt", "suspended"),
        ({"kind": "breakpoint", "reason": 7}, "breakpoint", "suspended"),
        ({"kind": "nonsense"}, "suspend", "suspended"),
    ],
)
def test_agent_suspend(args: dict[str, Any], kind: str, reason: str) -> None:
    plan = agent_suspend(call(AGENT_SUSPEND, **args))
    assert plan.act is Act.FINISH and plan.decision == "suspend"
    assert plan.outcome is not None and plan.outcome.status == "suspend"
    held = plan.outcome.result
    assert held == {
        "kind": kind,
        "reason": reason,
        "payload": args.get("payload"),
        "step": 3,
        "tool": AGENT_SUSPEND,
    }


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"reason": "why"}, {"reason": "why", "kind": "suspend", "step": 3, "tool": "lookup"}),
        ({"kind": "interrupt", "step": 99}, {"kind": "interrupt", "step": 3, "tool": "lookup"}),
        ("plain", {"reason": "plain", "kind": "suspend", "step": 3, "tool": "lookup"}),
    ],
)
def test_suspend_payload_is_marked_with_its_step(result: Any, expected: dict[str, Any]) -> None:
    assert suspend_payload(call(), result) == expected


@pytest.mark.parametrize(
    ("status", "result", "expected"),
    [
        ("success", {"v": 1}, {"v": 1}),
        ("suspend", {"reason": "r"}, {"reason": "r", "kind": "suspend", "step": 3, "tool": "lookup"}),
        ("suspend", "text", {"kind": "suspend", "step": 3, "tool": "lookup"}),
    ],
)
def test_reported_outcome(status: str, result: Any, expected: Any) -> None:
    outcome = reported_outcome(
        status=status, result=result, error=None, duration_ms=None, step=3, tool="lookup"
    )
    assert outcome.status == status and outcome.result == expected and outcome.duration_ms == 0.0


def test_plans_that_run_nothing() -> None:
    refusal = Refusal(
        limit="maxStepsPerExecution", value=3, figure=4, category="budget_exceeded", message="m"
    )
    assert not_run(refuse(refusal)).route == "none"
    assert refuse(refusal).act not in RUNS and refuse(refusal).reason == "m"
