"""What a resume does, as pure functions of the hold and the decision (issue 42).

A resume (oe/resumes.py) checks the decision against what the execution holds (`problem`), records it as
a `Review` (`review_entry`) and audits what will run once the replay reaches the held step (`executed`).
Nothing here reads the store; the unit tests call these functions directly.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.oe.holds import APPROVAL_REQUIRED, CHILD, INTERRUPT, value_problem
from agent_runtime.oe.limit_holds import LIMIT, raised_to
from agent_runtime.oe.limit_holds import value_problem as limit_value_problem
from agent_runtime.oe.store.base import ExecutionRecord, Identity, Review
from agent_runtime.protocol import AGENT_SUSPEND, ExecutionState, ReviewDecision, SuspendReply

S = ExecutionState


def hold_kind(suspension: dict[str, Any] | None) -> str:
    """The kind of hold the execution waits on (`suspend` when the suspension names none)."""
    return str((suspension or {}).get("kind") or "suspend")


def problem(kind: str, review: ReviewDecision) -> tuple[str, str] | None:
    """(field, why) when the decision does not fit the hold, else None: a 400 naming the field."""
    if review.args is not None and review.decision != "approved":
        return "args", "edited arguments go with an approved decision only; drop args, or approve"
    if review.args is not None and kind == LIMIT:
        return (
            "args",
            "this execution waits on a limit, not on the approval of a call: an approval raises the limit "
            "and the held call runs as it was asked; drop args",
        )
    if review.args is not None and kind != APPROVAL_REQUIRED:
        return (
            "args",
            "this execution waits on app.suspend, not on the approval of a call, so there are no held "
            "arguments to edit; drop args",
        )
    refusal = limit_value_problem(review) if kind == LIMIT else value_problem(kind, review)
    if refusal is not None:
        return "value", refusal
    return None


def child_hold_problem(suspension: dict[str, Any] | None, *, by_child: bool) -> tuple[str, str] | None:
    """A parent held on its child (an agentRef call) is decided by the child's end alone: a person's
    decision is refused, naming the child whose review to decide (oe/children.py)."""
    held = suspension or {}
    if held.get("kind") != CHILD or by_child:
        return None
    payload = held.get("payload") if isinstance(held.get("payload"), dict) else {}
    child = payload.get("child_execution_id", "?")
    return (
        "decision",
        f"this execution waits on its child execution {child} ({payload.get('child_agent', '?')}): decide "
        f"the child's hold (POST .../executions/{child}/resume); this execution goes on by itself with "
        "the child's answer",
    )


def claimed_decision(review: ReviewDecision) -> dict[str, Any]:
    """What is claimed once per suspension: the same decision sent again goes on, another is refused."""
    return {"decision": review.decision, "reviewer_notes": review.reviewer_notes, "args": review.args}


def review_entry(
    suspension: dict[str, Any] | None,
    review: ReviewDecision,
    *,
    decided_by: Identity | None,
    now: float,
) -> Review:
    """The decision as the execution keeps it (the replay answers the held step from it)."""
    held = suspension or {}
    step = held.get("step")
    reason = held.get("reason")
    return Review(
        step=step if isinstance(step, int) else None,
        tool=held.get("tool") if isinstance(held.get("tool"), str) else None,
        kind=hold_kind(held),
        decision=review.decision,
        reviewer_notes=review.reviewer_notes,
        args=review.args,
        reason=reason if isinstance(reason, str) else None,
        payload=held.get("payload"),
        value=review.value,
        at=now,
        decided_by=decided_by,
    )


def executed(suspension: dict[str, Any] | None, review: ReviewDecision) -> Any:
    """What runs because of the decision, for the audit: the approved call's arguments (the reviewer's
    edit or the held ones), an approved interrupt's value, a raised limit, or None."""
    held = suspension or {}
    kind = hold_kind(held)
    if review.decision != "approved":
        return None
    if kind == APPROVAL_REQUIRED:
        return review.args if review.args is not None else held.get("args")
    if kind == INTERRUPT:
        return {"value": review.value}
    if kind == LIMIT:
        payload = held.get("payload") if isinstance(held.get("payload"), dict) else {}
        return {"limit": payload.get("limit"), "raised_to": raised_to(payload, review.value)}
    return None


def not_suspended(record: ExecutionRecord) -> str:
    """Why a resume cannot apply, in words a client retrying a lost answer can act on."""
    if record.reviews and record.status is not S.SUSPENDED:
        last = record.reviews[-1]
        return (
            f"the execution is {record.status.value}, not suspended: it was already resumed "
            f"({last.decision}{f' at step {last.step}' if last.step is not None else ''})"
        )
    return f"the execution is {record.status.value}, not suspended; only a suspended execution resumes"


def suspend_replies(record: ExecutionRecord) -> list[SuspendReply]:
    """The decisions that answer agent-level `app.suspend` calls, for a run to return synchronously."""
    return [
        SuspendReply(
            step=review.step,
            reason=review.reason or "",
            payload=review.payload,
            decision=review.decision,
            reviewer_notes=review.reviewer_notes,
            kind=review.kind,
            value=review.value,
        )
        for review in record.reviews
        if review.tool == AGENT_SUSPEND and review.step is not None
    ]
