"""How clients and reviewers see an execution (OE-02): pure functions of the stored record."""

from __future__ import annotations

import time
from typing import Any

from agent_runtime.oe.audit import redact_value
from agent_runtime.oe.holds import APPROVAL_REQUIRED, CHILD, INTERRUPT
from agent_runtime.oe.limit_holds import LIMIT
from agent_runtime.oe.store.base import ExecutionRecord
from agent_runtime.protocol import ExecutionState

S = ExecutionState


def client_view(record: ExecutionRecord, *, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """The execution as clients see it (OE-02): lower-case status, ISO times, no secret values."""

    view: dict[str, Any] = {
        "execution_id": record.execution_id,
        "agent": record.agent,
        "project_id": record.project_id,
        "session_id": record.session_id,
        "status": record.status.value,
        "step_count": record.step_count,
        "runs": record.runs,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
        "finished_at": iso(record.finished_at),
    }
    if record.user_id is not None:
        view["user_id"] = record.user_id
    if record.invoked_by is not None:
        view["invoked_by"] = record.invoked_by.model_dump()
    if record.cancelled_by is not None:
        view["cancelled_by"] = record.cancelled_by.model_dump()
    if record.interrupted_by:
        view["interrupted_by"] = [
            {"step": asked.step, "by": asked.by.model_dump(), "at": iso(asked.at)}
            for asked in record.interrupted_by
        ]
    if record.status is S.COMPLETED:
        view["result"] = record.result
    if record.error is not None:
        view["error"] = record.error.model_dump(exclude_none=True)
    if record.suspension is not None:
        view["suspension"] = redact_value(record.suspension, secrets=secrets)
    if record.reviews:
        view["reviews"] = [
            {
                **redact_value(
                    review.model_dump(
                        mode="json", exclude={"at", "decided_by"} if review.decided_by is None else {"at"}
                    ),
                    secrets=secrets,
                ),
                "at": iso(review.at),
            }
            for review in record.reviews
        ]
    if record.restarts:
        view["restarts"] = record.restarts
    if record.parent is not None:
        # A child an agentRef started (issue 38): the parent execution and the step that called it.
        view["parent"] = record.parent.model_dump()
    if record.forked_from is not None:
        # A session fork (issue 39): the execution it was forked from and the step it re-ran from.
        view["forked_from"] = record.forked_from
        view["at_step"] = record.at_step
    return view


def review_view(record: ExecutionRecord, *, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """A suspended execution as a reviewer sees it: what it asks, and where to send the decision."""
    held = redact_value(record.suspension or {}, secrets=secrets)
    asks = {key: held[key] for key in ("kind", "step", "tool", "args", "reason", "payload") if key in held}
    asks.setdefault("kind", "suspend")
    decisions = ["approved", "rejected"]
    resume = f"/api/v1/projects/{record.project_id}/executions/{record.execution_id}/resume"
    child = asks.get("payload") if asks["kind"] == CHILD else None
    if isinstance(child, dict) and isinstance(child.get("child_execution_id"), str):
        # Held on its child (an agentRef call): the decision is the child's, at the child's resume route.
        decisions = []
        project = str(child.get("child_agent", record.agent)).split("/", 1)[0]
        resume = f"/api/v1/projects/{project}/executions/{child['child_execution_id']}/resume"
    return {
        "execution_id": record.execution_id,
        "agent": record.agent,
        "project_id": record.project_id,
        "session_id": record.session_id,
        "user_id": record.user_id,
        "waiting_since": iso(record.updated_at),
        "created_at": iso(record.created_at),
        "asks": asks,
        "decisions": decisions,
        "may_edit_args": asks["kind"] == APPROVAL_REQUIRED,
        # An interrupt's resume value, or a limit raised for this execution (onExceed: suspend).
        "may_send_value": asks["kind"] in (INTERRUPT, LIMIT),
        "resume": resume,
    }


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}Z"


__all__ = ["client_view", "iso", "review_view"]
