"""LangGraph stream modes through the OE (issue 32): what an event named `updates`, `values`, `messages`
or `custom` carries, and whether a runtime's chunk may be published at all.

The chunk is published only into an execution of the calling Agent that is running and whose client asked
for that mode; its data goes through the same redaction and size cap as a `step_finished` result."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_runtime.oe.step_content import step_content
from agent_runtime.oe.store.base import ExecutionRecord
from agent_runtime.protocol import ExecutionState


def chunk_refusal(record: ExecutionRecord, *, mode: str) -> str | None:
    """Why this chunk may not be published into `record` (None: it may)."""
    if record.status != ExecutionState.RUNNING:
        return f"execution {record.execution_id!r} is {record.status.value}, not running"
    if mode not in record.stream_mode:
        asked = ", ".join(record.stream_mode) or "none"
        return f"stream mode {mode!r} was not asked for on /invoke (stream_mode: {asked})"
    return None


def chunk_event_data(data: Any, *, secrets: Iterable[str], max_bytes: int) -> dict[str, Any]:
    """`{"data": ..., "truncated": bool}` (and `bytes` when cut): the chunk as the client may see it."""
    content = step_content(result=data, error=None, secrets=secrets, max_bytes=max_bytes)
    out: dict[str, Any] = {"data": content.pop("result")}
    out.update(content)
    return out
