"""The OE's part of the durable execution log: each event it publishes (a lifecycle change or a step) is
also one record of `agent_runtime.execution_log`, written under the span that was current.

Only names, states and categories go in (the scalar fields of the event's data): never a suspension's
payload or held arguments, never a result.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.execution_log import ExecutionLog
from agent_runtime.oe.events import EventBus
from agent_runtime.oe.store.base import EventRecord, Store

_STEP_EVENTS = frozenset({"step_started", "step_finished"})
_DETAIL_KEYS = (
    "route",
    "from_cache",
    "error_category",
    "approved",
    "decision",
    "restarts",
    "agent",
    "agent_name",
)


def log_fields(record: EventRecord) -> dict[str, Any]:
    """What one event becomes in the execution log (pure)."""
    data = record.data or {}
    detail = {key: data[key] for key in _DETAIL_KEYS if isinstance(data.get(key), str | int | float | bool)}
    error = data.get("error")
    if isinstance(error, dict) and isinstance(error.get("category"), str):
        detail["error_category"] = error["category"]
    tool = data.get("tool")
    status = data.get("status")
    return {
        "kind": "step" if record.type in _STEP_EVENTS else "lifecycle",
        "event": record.type,
        "step": record.step,
        "tool": tool if isinstance(tool, str) else None,
        "status": status if isinstance(status, str) else None,
        "detail": detail,
    }


class LoggedEventBus(EventBus):
    """An `EventBus` whose every published event is also written to the execution log."""

    def __init__(self, *, store: Store, log: ExecutionLog, **kwargs: Any) -> None:
        super().__init__(store=store, **kwargs)
        self.log = log

    async def publish(
        self, execution_id: str, *, type: str, step: int | None = None, data: dict[str, Any] | None = None
    ) -> EventRecord:
        record = await super().publish(execution_id, type=type, step=step, data=data)
        self.log.write(execution_id, **log_fields(record))
        return record
