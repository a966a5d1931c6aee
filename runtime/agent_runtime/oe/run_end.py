"""What the end of a run (the AER's callback) changes, as pure functions (issue 42).

`changes` is the state write a callback makes of a running execution; `same` says whether a callback
that finds the execution already moved repeats the one that moved it (a no-op) or conflicts (a 409).
"""

from __future__ import annotations

from typing import Any

from agent_runtime.oe.store.base import ExecutionRecord
from agent_runtime.protocol import CallError, ExecutionState, ExecutorCallback, state_of_callback

S = ExecutionState
FINAL = frozenset({"completed", "failed", "cancelled"})


def changes(current: ExecutionRecord, report: ExecutorCallback, *, now: float) -> dict[str, Any]:
    """The write that ends the run: completed with its result, failed with its error, or suspended on
    what the OE held at the suspending step (authoritative; the AER's metadata rides along)."""
    target = state_of_callback(report.status)
    update: dict[str, Any] = {"status": target, "updated_at": now}
    if target is S.COMPLETED:
        update.update(result=report.result, finished_at=now, suspension=None)
    elif target is S.FAILED:
        update.update(error=report.error or CallError(category="failed"), finished_at=now, suspension=None)
    else:
        held = (
            current.suspension if current.status is S.RUNNING and current.suspension else {"kind": "suspend"}
        )
        update["suspension"] = {**held, "metadata": report.metadata or {}}
    return update


def same(record: ExecutionRecord, report: ExecutorCallback) -> bool:
    """True when `record` already shows what `report` says (the same callback sent again)."""
    if record.status is not state_of_callback(report.status):
        return False
    if report.status.value == "COMPLETED":
        return record.result == report.result
    if report.status.value == "FAILED":
        return record.error is not None and report.error is not None and record.error == report.error
    return (record.suspension or {}).get("metadata") == (report.metadata or {})


def conflict_code(record: ExecutionRecord) -> str:
    """The 409's code for a callback that cannot change the execution."""
    return "execution_final" if record.status.value in FINAL else "not_running"
