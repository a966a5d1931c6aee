"""Hold kinds and the resume body's `value` (issue 31): which holds take a value, what a decision answers."""

from __future__ import annotations

import pytest

from agent_runtime.oe.holds import agent_hold_kind, decided_answer, value_problem
from agent_runtime.oe.reviews import ReviewBodyError, flat_review, wrapped_review
from agent_runtime.protocol import SuspendReply

pytestmark = pytest.mark.unit


def test_an_agent_hold_names_its_kind_and_anything_else_is_a_suspend() -> None:
    assert agent_hold_kind({"kind": "interrupt"}) == "interrupt"
    assert agent_hold_kind({"kind": "breakpoint"}) == "breakpoint"
    # app.suspend sends no kind; an agent cannot make itself look like an approval of a call.
    assert agent_hold_kind({}) == "suspend"
    assert agent_hold_kind({"kind": "approval_required"}) == "suspend"
    assert agent_hold_kind({"kind": ["interrupt"]}) == "suspend"


def test_value_is_read_from_the_flat_body_only_when_sent_and_may_be_null() -> None:
    assert "value" not in flat_review({"decision": "approved"}).model_fields_set
    sent = flat_review({"decision": "approved", "value": None})
    assert "value" in sent.model_fields_set and sent.value is None
    assert flat_review({"decision": "approved", "value": {"action": "update", "data": [1]}}).value == {
        "action": "update",
        "data": [1],
    }
    assert wrapped_review({"human_review": {"decision": "approved", "value": 3}}).value == 3
    with pytest.raises(ReviewBodyError) as unknown:
        flat_review({"decision": "approved", "values": 3})
    assert unknown.value.problems[0]["field"] == "values"


@pytest.mark.parametrize(
    ("kind", "body", "problem"),
    [
        ("interrupt", {"decision": "approved", "value": 1}, None),
        ("interrupt", {"decision": "approved"}, None),
        ("interrupt", {"decision": "rejected", "value": 1}, "approved decision only"),
        ("breakpoint", {"decision": "approved", "value": 1}, "only an interrupt takes a value"),
        ("suspend", {"decision": "approved", "value": 1}, "only an interrupt takes a value"),
        ("approval_required", {"decision": "approved", "value": 1}, "only an interrupt takes a value"),
        ("breakpoint", {"decision": "approved"}, None),
    ],
)
def test_value_fits_an_approved_interrupt_only(
    kind: str, body: dict[str, object], problem: str | None
) -> None:
    found = value_problem(kind, flat_review(body))
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_a_decided_hold_answers_what_the_resumed_run_was_handed() -> None:
    interrupt = decided_answer(kind="interrupt", decision="approved", reviewer_notes="ok", value={"a": 1})
    assert interrupt == {"decision": "approved", "reviewer_notes": "ok", "value": {"a": 1}}
    reply = SuspendReply(
        step=3, reason="interrupt", decision="approved", reviewer_notes="ok", kind="interrupt"
    )
    assert reply.model_copy(update={"value": {"a": 1}}).answer() == interrupt
    # app.suspend's answer keeps its shape (no value key): the base SDK's agents see what they always did.
    assert decided_answer(kind="suspend", decision="rejected", reviewer_notes=None, value=None) == {
        "decision": "rejected",
        "reviewer_notes": None,
    }
