"""onExceed: suspend (issue 34), its pure decisions: the hold a limit makes, what an approval raises for the
execution, what a rejection fails it with, which decision bodies fit (oe/limit_holds.py, oe/step_plan.py,
oe/resume_plan.py)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime.oe.limit_holds import LIMIT, limit_hold, raised, raised_to, refusal_of
from agent_runtime.oe.limits import Limits, Refusal, check_call
from agent_runtime.oe.resume_plan import executed, problem
from agent_runtime.oe.step_plan import Act, approved, limited, settled
from agent_runtime.oe.store.base import ExecutionRecord, Review, StepRecord
from agent_runtime.oe.views import review_view
from agent_runtime.protocol import INVOKE_LLM, CallOutcome, ReviewDecision, ToolExecuteRequest

STEPS = Refusal(
    limit="maxStepsPerExecution", value=3, figure=4, category="budget_exceeded", message="4th of 3 steps"
)
RATE = Refusal(limit="toolCallsPerMinute", value=5, figure=6, category="rate_limited", message="too fast")


def call(**args: Any) -> ToolExecuteRequest:
    return ToolExecuteRequest(execution_id="e1", step=4, tool="shout", args=args)


def review(decision: str = "approved", *, payload: Any, value: Any = None) -> Review:
    return Review(step=4, kind=LIMIT, decision=decision, payload=payload, value=value, at=1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("on_exceed", "act", "decision"),
    [("fail", Act.REFUSE, "refused"), ("suspend", Act.FINISH, "limit")],
)
def test_limited(on_exceed: str, act: Act, decision: str) -> None:
    plan = limited(call(text="x"), STEPS, on_exceed=on_exceed)
    assert (plan.act, plan.decision, plan.refusal) == (act, decision, STEPS)
    if act is Act.FINISH:
        assert plan.outcome is not None and plan.outcome.status == "suspend"
        held = plan.outcome.result
        assert held["kind"] == LIMIT and held["step"] == 4 and held["args"] == {"text": "x"}
        assert held["payload"] == {
            "limit": "maxStepsPerExecution",
            "value": 3,
            "figure": 4,
            "category": "budget_exceeded",
        }
        assert "4th of 3 steps" in held["reason"] and "onExceed: suspend" in held["reason"]


def test_a_held_model_call_keeps_its_request() -> None:
    model = ToolExecuteRequest(
        execution_id="e1", step=2, tool=INVOKE_LLM, llm_id="m", messages=[{"type": "human", "content": "q"}]
    )
    plan = limited(model, STEPS, on_exceed="suspend")
    assert plan.outcome is not None and plan.outcome.result["llm"]["llm_id"] == "m"


PAYLOAD = {"limit": "maxStepsPerExecution", "value": 3, "figure": 4, "category": "budget_exceeded"}


@pytest.mark.parametrize(
    ("payload", "value", "expected"),
    [
        (PAYLOAD, None, 6.0),  # twice the limit
        (PAYLOAD, 10, 10.0),  # the reviewer's figure
        (PAYLOAD, 2, 6.0),  # not above the limit: twice it
        (PAYLOAD, True, 6.0),  # not a number
        ({"limit": "x"}, 5, None),
        ("nonsense", 5, None),
    ],
)
def test_raised_to(payload: Any, value: Any, expected: float | None) -> None:
    assert raised_to(payload, value) == expected


@pytest.mark.parametrize(
    ("reviews", "steps", "cost"),
    [
        ([], 3, 1.0),
        ([review(payload=PAYLOAD)], 6, 1.0),
        ([review(payload=PAYLOAD, value=10)], 10, 1.0),
        ([review("rejected", payload=PAYLOAD)], 3, 1.0),
        # The latest approval wins: a second hold already reported the raised value.
        ([review(payload=PAYLOAD), review(payload={**PAYLOAD, "value": 6, "figure": 7})], 12, 1.0),
        ([review(payload={"limit": "maxCostPerExecution", "value": 1.0, "figure": 1.2})], 3, 2.0),
        # A limit no review may raise for one execution (the shared rate bucket) stays.
        ([review(payload={"limit": "toolCallsPerMinute", "value": 5, "figure": 6})], 3, 1.0),
    ],
)
def test_raised(reviews: list[Review], steps: int, cost: float) -> None:
    limits = Limits.model_validate(
        {"maxStepsPerExecution": 3, "maxCostPerExecution": 1.0, "toolCallsPerMinute": 5}
    )
    mine = raised(limits, reviews)
    assert (mine.max_steps_per_execution, mine.max_cost_per_execution) == (steps, cost)
    assert mine.tool_calls_per_minute == 5
    # What the execution's next call is checked against: refused at the raised figure, not before.
    assert check_call(mine, {"steps": steps}, is_llm=False) is None
    refusal = check_call(mine, {"steps": steps + 1}, is_llm=False)
    assert refusal is not None and refusal.value == steps


def held_step(refusal: Refusal) -> StepRecord:
    held = limit_hold(call(text="x"), refusal, llm=None)
    return StepRecord(
        execution_id="e1",
        step=4,
        tool="shout",
        fingerprint="fp",
        state="done",
        outcome=CallOutcome(status="suspend", result=held),
        run=1,
        created_at=0,
        updated_at=0,
    )


@pytest.mark.parametrize("refusal", [STEPS, RATE])
def test_a_rejected_limit_fails_the_execution_with_its_category(refusal: Refusal) -> None:
    step = held_step(refusal)
    decided = review("rejected", payload=step.outcome.result["payload"])  # type: ignore[union-attr]
    decided = decided.model_copy(update={"reviewer_notes": "stop it"})
    plan = settled(step, decided)
    assert plan is not None and plan.act is Act.REFUSE and plan.decision == "rejected"
    assert plan.refusal is not None
    assert (plan.refusal.limit, plan.refusal.category) == (refusal.limit, refusal.category)
    assert "stop it" in plan.refusal.message


def test_an_approved_limit_runs_the_held_call() -> None:
    step = held_step(STEPS)
    decided = review(payload=step.outcome.result["payload"])  # type: ignore[union-attr]
    assert settled(step, decided) is None
    plan = approved(call(text="x"), step, decided, None, runs=2)
    assert plan.act is Act.TOOL_POD and plan.args == {"text": "x"} and plan.approved


def test_refusal_of_a_payload_without_figures() -> None:
    refusal = refusal_of({"payload": "?"}, notes=None)
    assert refusal.category == "budget_exceeded" and "no notes" in refusal.message


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"decision": "approved"}, None),
        ({"decision": "approved", "value": 10}, None),
        ({"decision": "approved", "value": 2.5}, None),
        ({"decision": "rejected"}, None),
        ({"decision": "approved", "value": "ten"}, "value"),
        ({"decision": "approved", "value": 0}, "value"),
        ({"decision": "rejected", "value": 10}, "value"),
        ({"decision": "approved", "args": {"text": "y"}}, "args"),
    ],
)
def test_which_decisions_fit_a_limit_hold(body: dict[str, Any], field: str | None) -> None:
    found = problem(LIMIT, ReviewDecision.model_validate(body))
    assert (found[0] if found else None) == field


def test_the_resume_audits_the_raise() -> None:
    held = limit_hold(call(text="x"), STEPS, llm=None)
    assert executed(held, ReviewDecision(decision="approved", value=9)) == {
        "limit": "maxStepsPerExecution",
        "raised_to": 9.0,
    }
    assert executed(held, ReviewDecision(decision="rejected")) is None


def test_a_reviewer_may_send_the_raised_limit() -> None:
    record = ExecutionRecord(
        execution_id="e1",
        agent="ns/a",
        project_id="ns",
        workspace_id="ns.a",
        session_id="s",
        suspension=limit_hold(call(text="x"), STEPS, llm=None),
        created_at=0,
        updated_at=0,
    )
    view = review_view(record)
    assert view["asks"]["kind"] == LIMIT and view["may_send_value"] and not view["may_edit_args"]
    assert view["asks"]["payload"]["figure"] == 4
