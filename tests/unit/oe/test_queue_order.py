"""onLimit: queue (issue 34), its pure decisions: oldest first, and what a full Agent or user holds back
(oe/queue_order.py); the lifecycle lets a queued execution be admitted or cancelled, nothing else."""

from __future__ import annotations

import pytest

from agent_runtime.oe.lifecycle import ENTER_FROM
from agent_runtime.oe.limits import Limits, Refusal, check_concurrency
from agent_runtime.oe.queue_order import Admission, admission, fifo
from agent_runtime.oe.store.base import ExecutionRecord
from agent_runtime.protocol import ExecutionState

S = ExecutionState


def queued(execution_id: str, created_at: float) -> ExecutionRecord:
    return ExecutionRecord(
        execution_id=execution_id,
        agent="ns/a",
        project_id="ns",
        workspace_id="ns.a",
        session_id="s",
        status=S.QUEUED,
        created_at=created_at,
        updated_at=created_at,
    )


@pytest.mark.parametrize(
    ("records", "order"),
    [
        ([], []),
        ([queued("b", 2), queued("a", 1), queued("c", 3)], ["a", "b", "c"]),
        # The same instant: by id, so every replica reads the same order.
        ([queued("z", 1), queued("y", 1), queued("x", 0.5)], ["x", "y", "z"]),
    ],
)
def test_fifo(records: list[ExecutionRecord], order: list[str]) -> None:
    assert [record.execution_id for record in fifo(records)] == order


def refusal(limit: str) -> Refusal:
    return Refusal(limit=limit, value=1, figure=2, category="rate_limited", message="m")


@pytest.mark.parametrize(
    ("limits", "agent_running", "user_running", "expected"),
    [
        ({"maxConcurrentExecutions": 2, "onLimit": "queue"}, 1, None, Admission.START),
        ({"maxConcurrentExecutions": 2, "onLimit": "queue"}, 2, None, Admission.AGENT_FULL),
        ({"maxConcurrentExecutionsPerUser": 1, "onLimit": "queue"}, 5, 0, Admission.START),
        ({"maxConcurrentExecutionsPerUser": 1, "onLimit": "queue"}, 5, 1, Admission.USER_FULL),
        # Both full: the Agent's limit is checked first and holds everyone back.
        (
            {"maxConcurrentExecutions": 1, "maxConcurrentExecutionsPerUser": 1, "onLimit": "queue"},
            1,
            1,
            Admission.AGENT_FULL,
        ),
    ],
)
def test_admission(limits: dict, agent_running: int, user_running: int | None, expected: Admission) -> None:
    found = check_concurrency(
        Limits.model_validate(limits), agent_running=agent_running, user_running=user_running
    )
    assert admission(found) is expected


def test_admission_of_any_other_refusal_holds_the_agent() -> None:
    assert admission(refusal("maxConcurrentExecutions")) is Admission.AGENT_FULL
    assert admission(refusal("maxConcurrentExecutionsPerUser")) is Admission.USER_FULL


@pytest.mark.parametrize(
    ("target", "allowed"),
    [
        (S.PENDING, True),
        (S.CANCELLED, True),
        (S.RUNNING, False),
        (S.COMPLETED, False),
        (S.FAILED, False),
        (S.SUSPENDED, False),
    ],
)
def test_a_queued_execution_is_admitted_or_cancelled_only(target: S, allowed: bool) -> None:
    assert (S.QUEUED in ENTER_FROM.get(target, frozenset())) is allowed


def test_on_limit_queue_is_accepted_and_other_values_refused() -> None:
    assert Limits.model_validate({"onLimit": "queue"}).on_limit == "queue"
    with pytest.raises(ValueError, match=r"onLimit|on_limit"):
        Limits.model_validate({"onLimit": "wait"})
