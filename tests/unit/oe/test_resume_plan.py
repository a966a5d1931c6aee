"""What a resume does (oe/resume_plan.py) and what a run's end changes (oe/run_end.py), issue 42."""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime.oe.holds import APPROVAL_REQUIRED
from agent_runtime.oe.resume_plan import (
    claimed_decision,
    executed,
    hold_kind,
    not_suspended,
    problem,
    review_entry,
    suspend_replies,
)
from agent_runtime.oe.run_end import changes, conflict_code, same
from agent_runtime.oe.store.base import ExecutionRecord, Identity, Review
from agent_runtime.protocol import AGENT_SUSPEND, CallError, ExecutionState, ExecutorCallback, ReviewDecision

S = ExecutionState
APPROVAL = {
    "kind": APPROVAL_REQUIRED,
    "step": 2,
    "tool": "refund",
    "args": {"amount": 20000},
    "reason": "big",
}
SUSPEND = {"kind": "suspend", "step": 4, "tool": AGENT_SUSPEND, "reason": "ask", "payload": {"q": 1}}
INTERRUPT = {"kind": "interrupt", "step": 5, "tool": AGENT_SUSPEND, "payload": "which?"}


def decision(made: str = "approved", **fields: Any) -> ReviewDecision:
    return ReviewDecision(decision=made, **fields)  # type: ignore[arg-type]


def record(status: S = S.SUSPENDED, **fields: Any) -> ExecutionRecord:
    return ExecutionRecord(
        execution_id="e1",
        agent="ns/a",
        project_id="ns",
        workspace_id="ns.a",
        session_id="s",
        status=status,
        created_at=0,
        updated_at=0,
        **fields,
    )


@pytest.mark.parametrize(
    ("suspension", "review", "field"),
    [
        (APPROVAL, decision(), None),
        (APPROVAL, decision(args={"amount": 50}), None),
        (APPROVAL, decision("rejected", args={"amount": 50}), "args"),
        (SUSPEND, decision(args={"x": 1}), "args"),
        (SUSPEND, decision(value=3), "value"),
        (APPROVAL, decision(value=3), "value"),
        (INTERRUPT, decision(value=3), None),
        (INTERRUPT, decision("rejected", value=3), "value"),
        (INTERRUPT, decision("rejected"), None),
        (None, decision(), None),
    ],
)
def test_problem_names_the_field(
    suspension: dict[str, Any] | None, review: ReviewDecision, field: str | None
) -> None:
    found = problem(hold_kind(suspension), review)
    assert (found[0] if found else None) == field
    if found:
        assert "drop " + field in found[1]  # type: ignore[operator]


@pytest.mark.parametrize(
    ("suspension", "review", "expected"),
    [
        (APPROVAL, decision(), {"amount": 20000}),
        (APPROVAL, decision(args={"amount": 50}), {"amount": 50}),
        (APPROVAL, decision("rejected"), None),
        (INTERRUPT, decision(value={"pick": 2}), {"value": {"pick": 2}}),
        (INTERRUPT, decision("rejected"), None),
        (SUSPEND, decision(), None),
    ],
)
def test_executed(suspension: dict[str, Any], review: ReviewDecision, expected: Any) -> None:
    assert executed(suspension, review) == expected


@pytest.mark.parametrize(
    ("suspension", "step", "tool", "kind", "reason"),
    [
        (APPROVAL, 2, "refund", APPROVAL_REQUIRED, "big"),
        (SUSPEND, 4, AGENT_SUSPEND, "suspend", "ask"),
        ({"kind": "suspend", "step": "x", "tool": 7, "reason": 1}, None, None, "suspend", None),
        ({}, None, None, "suspend", None),
    ],
)
def test_review_entry(
    suspension: dict[str, Any], step: int | None, tool: str | None, kind: str, reason: str | None
) -> None:
    by = Identity(username="alice")
    entry = review_entry(suspension, decision(reviewer_notes="n"), decided_by=by, now=9.0)
    assert (entry.step, entry.tool, entry.kind, entry.reason) == (step, tool, kind, reason)
    assert entry.decision == "approved" and entry.reviewer_notes == "n" and entry.at == 9.0
    assert entry.decided_by == by and entry.payload == suspension.get("payload")


def test_the_claim_is_the_decision_notes_and_args() -> None:
    assert claimed_decision(decision("rejected", reviewer_notes="no")) == {
        "decision": "rejected",
        "reviewer_notes": "no",
        "args": None,
    }


@pytest.mark.parametrize(
    ("status", "reviews", "words"),
    [
        (S.RUNNING, [], "the execution is running, not suspended; only a suspended execution resumes"),
        (
            S.COMPLETED,
            [Review(step=2, kind="suspend", decision="approved", at=1)],
            "already resumed (approved at step 2)",
        ),
        (
            S.RUNNING,
            [Review(step=None, kind="suspend", decision="rejected", at=1)],
            "already resumed (rejected)",
        ),
    ],
)
def test_not_suspended(status: S, reviews: list[Review], words: str) -> None:
    assert words in not_suspended(record(status, reviews=reviews))


def test_suspend_replies_answer_agent_level_holds_only() -> None:
    reviews = [
        Review(step=2, tool="refund", kind=APPROVAL_REQUIRED, decision="approved", at=1),
        Review(step=4, tool=AGENT_SUSPEND, kind="suspend", decision="rejected", reason="ask", at=2),
        Review(step=None, tool=AGENT_SUSPEND, kind="suspend", decision="approved", at=3),
    ]
    replies = suspend_replies(record(reviews=reviews))
    assert [(r.step, r.decision, r.reason) for r in replies] == [(4, "rejected", "ask")]


def callback(status: str, **fields: Any) -> ExecutorCallback:
    return ExecutorCallback(execution_id="e1", status=status, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("current", "report", "expected"),
    [
        (
            record(S.RUNNING),
            callback("COMPLETED", result=7),
            {"status": S.COMPLETED, "result": 7, "suspension": None},
        ),
        (
            record(S.RUNNING),
            callback("FAILED", error=CallError(category="boom")),
            {"status": S.FAILED, "error": CallError(category="boom"), "suspension": None},
        ),
        (record(S.RUNNING), callback("FAILED"), {"status": S.FAILED, "error": CallError(category="failed")}),
        # What the OE held at the suspending step is authoritative; the AER's metadata rides along.
        (
            record(S.RUNNING, suspension=APPROVAL),
            callback("SUSPENDED", metadata={"m": 1}),
            {"status": S.SUSPENDED, "suspension": {**APPROVAL, "metadata": {"m": 1}}},
        ),
        (
            record(S.RUNNING),
            callback("SUSPENDED"),
            {"status": S.SUSPENDED, "suspension": {"kind": "suspend", "metadata": {}}},
        ),
        (
            record(S.CANCELLED, suspension=APPROVAL),
            callback("SUSPENDED"),
            {"status": S.SUSPENDED, "suspension": {"kind": "suspend", "metadata": {}}},
        ),
    ],
)
def test_changes(current: ExecutionRecord, report: ExecutorCallback, expected: dict[str, Any]) -> None:
    update = changes(current, report, now=5.0)
    assert update["updated_at"] == 5.0
    for key, value in expected.items():
        assert update[key] == value
    assert ("finished_at" in update) == (expected["status"] is not S.SUSPENDED)


@pytest.mark.parametrize(
    ("stored", "report", "is_same"),
    [
        (record(S.COMPLETED, result=7), callback("COMPLETED", result=7), True),
        (record(S.COMPLETED, result=7), callback("COMPLETED", result=8), False),
        (
            record(S.FAILED, error=CallError(category="x")),
            callback("FAILED", error=CallError(category="x")),
            True,
        ),
        (
            record(S.FAILED, error=CallError(category="x")),
            callback("FAILED", error=CallError(category="y")),
            False,
        ),
        (
            record(S.SUSPENDED, suspension={"metadata": {"a": 1}}),
            callback("SUSPENDED", metadata={"a": 1}),
            True,
        ),
        (record(S.SUSPENDED, suspension={"metadata": {"a": 1}}), callback("SUSPENDED"), False),
        (record(S.CANCELLED, result=7), callback("COMPLETED", result=7), False),
    ],
)
def test_same(stored: ExecutionRecord, report: ExecutorCallback, is_same: bool) -> None:
    assert same(stored, report) is is_same


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (S.COMPLETED, "execution_final"),
        (S.FAILED, "execution_final"),
        (S.CANCELLED, "execution_final"),
        (S.SUSPENDED, "not_running"),
        (S.PENDING, "not_running"),
    ],
)
def test_conflict_code(status: S, code: str) -> None:
    assert conflict_code(record(status)) == code
