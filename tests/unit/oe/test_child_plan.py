"""agentRef's decisions (oe/child_plan.py, issue 38): the child's input, its start key, refusals, what the
parent's step answers and when a parent's hold is lifted."""

from __future__ import annotations

from agent_runtime.oe.child_plan import (
    CHILD_FAILED,
    FORBIDDEN,
    MAX_DEPTH,
    TOO_DEEP,
    UNKNOWN,
    child_input,
    claim_key,
    hold,
    lifts,
    link,
    orphaned,
    refusal,
    settled_outcome,
)
from agent_runtime.oe.resume_plan import child_hold_problem
from agent_runtime.oe.store.base import ExecutionRecord, Identity, ParentLink
from agent_runtime.oe.views import review_view
from agent_runtime.protocol import CallError, ExecutionState

S = ExecutionState


def record(execution_id: str = "p", **fields: object) -> ExecutionRecord:
    base = {
        "execution_id": execution_id,
        "agent": "team-a/loop",
        "project_id": "team-a",
        "workspace_id": "team-a.loop",
        "session_id": "s",
        "created_at": 1.0,
        "updated_at": 1.0,
        "invoked_by": Identity(username="ann"),
    }
    return ExecutionRecord.model_validate({**base, **fields})


def test_the_input_is_the_input_argument_alone_or_the_arguments() -> None:
    assert child_input({"input": [1, 2]}) == [1, 2]
    assert child_input({"input": 1, "other": 2}) == {"input": 1, "other": 2}
    assert claim_key("p", 3) == "child:p:3" != claim_key("p", 4)


def test_the_link_counts_depth_and_deep_children_start_none() -> None:
    first = link(record(), 2)
    assert first == ParentLink(execution_id="p", step=2, agent="team-a/loop", depth=1)
    deep = record(parent=ParentLink(execution_id="q", step=1, agent="a/b", depth=MAX_DEPTH))
    assert link(deep, 1).depth == MAX_DEPTH + 1
    refused = refusal(deep, target="team-a/loop", known=True, allowed=True)
    assert refused is not None and refused.error is not None and refused.error.category == TOO_DEEP


def test_refusals_name_the_agent_the_user_and_the_permission() -> None:
    unknown = refusal(record(), target="team-b/x", known=False, allowed=False)
    assert unknown is not None and unknown.error is not None and unknown.error.category == UNKNOWN
    forbidden = refusal(record(), target="team-b/x", known=True, allowed=False)
    assert forbidden is not None and forbidden.error is not None
    assert forbidden.error.category == FORBIDDEN
    assert "ann" in forbidden.error.explanation and "agents/invoke" in forbidden.error.explanation
    assert refusal(record(), target="team-b/x", known=True, allowed=True) is None


def test_the_step_answers_the_childs_result_error_or_a_hold_of_its_own() -> None:
    done = record("c", status=S.COMPLETED, result={"ok": 1})
    assert settled_outcome(done, call_args={}, secrets=()).result == {"ok": 1}
    failed = record("c", status=S.FAILED, error=CallError(category="aer_lost", explanation="gone"))
    outcome = settled_outcome(failed, call_args={}, secrets=())
    assert outcome.error is not None and outcome.error.category == CHILD_FAILED
    assert "aer_lost" in outcome.error.explanation
    secret = "tok-s3cr3t-0a9f3e71"
    suspension = {"kind": "approval_required", "step": 2, "tool": "pay", "args": {"key": secret}}
    held = record("c", status=S.SUSPENDED, suspension=suspension)
    outcome = settled_outcome(held, call_args={"input": 1}, secrets=("tok-s3cr3t-0a9f3e71",))
    assert outcome.status == "suspend"
    assert outcome.result["kind"] == "child" and outcome.result["args"] == {"input": 1}
    assert outcome.result["payload"]["held"]["tool"] == "pay"
    assert "tok-s3cr3t-0a9f3e71" not in str(outcome.result)


def test_a_parents_hold_is_lifted_by_its_childs_end_or_next_hold_only() -> None:
    child = record("c", status=S.SUSPENDED, suspension={"step": 1, "tool": "pay"})
    parent = record(status=S.SUSPENDED, suspension=hold(child, call_args={}, secrets=()))
    assert not lifts(parent, child)  # the same hold: nothing to do
    assert lifts(parent, child.model_copy(update={"status": S.COMPLETED}))
    assert lifts(parent, child.model_copy(update={"suspension": {"step": 3, "tool": "pay"}}))
    assert not lifts(parent, child.model_copy(update={"status": S.RUNNING}))
    assert not lifts(parent, record("other", status=S.COMPLETED))
    assert not lifts(parent.model_copy(update={"status": S.RUNNING}), child)
    problem = child_hold_problem(parent.suspension, by_child=False)
    assert problem is not None and problem[0] == "decision" and "c" in problem[1]
    assert child_hold_problem(parent.suspension, by_child=True) is None
    assert child_hold_problem({"kind": "approval_required"}, by_child=False) is None


def test_a_child_is_orphaned_when_its_parent_ended_and_it_has_not() -> None:
    child = record("c", status=S.RUNNING)
    assert orphaned(record(status=S.CANCELLED), child)
    assert orphaned(record(status=S.FAILED), child.model_copy(update={"status": S.SUSPENDED}))
    assert orphaned(None, child)
    assert not orphaned(record(status=S.RUNNING), child)
    assert not orphaned(record(status=S.SUSPENDED), child)
    assert not orphaned(record(status=S.CANCELLED), child.model_copy(update={"status": S.COMPLETED}))


def test_a_parent_held_on_its_child_is_reviewed_at_the_childs_route_with_no_decisions_of_its_own() -> None:
    child = record("c", agent="team-b/ledger", project_id="team-b", status=S.SUSPENDED, suspension={})
    parent = record(status=S.SUSPENDED, suspension=hold(child, call_args={}, secrets=()))
    view = review_view(parent)
    assert view["decisions"] == [] and view["resume"] == "/api/v1/projects/team-b/executions/c/resume"
    plain = review_view(record(status=S.SUSPENDED, suspension={"kind": "approval_required", "step": 1}))
    assert plain["decisions"] == ["approved", "rejected"]
    assert plain["resume"] == "/api/v1/projects/team-a/executions/p/resume"
