"""What the OE publishes of a LangGraph stream-mode chunk (issue 32): only into a running execution that
asked for the mode, redacted like a step result, cut to the size cap."""

from __future__ import annotations

import json

import pytest

from agent_runtime.oe.graph_stream import chunk_event_data, chunk_refusal
from agent_runtime.oe.store.base import ExecutionRecord
from agent_runtime.protocol import ExecutionState

pytestmark = pytest.mark.unit

SECRET = "sk-planted-secret-4f1e9a"


def _record(status: ExecutionState, modes: list[str]) -> ExecutionRecord:
    return ExecutionRecord(
        execution_id="e1",
        agent="team-a/agent",
        project_id="team-a",
        workspace_id="team-a.agent",
        session_id="s",
        status=status,
        created_at=0.0,
        updated_at=0.0,
        stream_mode=modes,
    )


def test_a_chunk_goes_only_into_a_running_execution_that_asked_for_its_mode() -> None:
    assert chunk_refusal(_record(ExecutionState.RUNNING, ["updates", "custom"]), mode="custom") is None
    unasked = chunk_refusal(_record(ExecutionState.RUNNING, ["updates"]), mode="values")
    assert unasked is not None and "stream_mode" in unasked and "updates" in unasked
    done = chunk_refusal(_record(ExecutionState.COMPLETED, ["values"]), mode="values")
    assert done is not None and "completed" in done


def test_a_chunk_is_redacted_and_cut_to_the_cap() -> None:
    chunk = {"messages": [{"type": "ai", "content": f"the key is {SECRET}"}], "api_key": "visible?"}
    data = chunk_event_data(chunk, secrets=[SECRET], max_bytes=10_000)
    text = json.dumps(data)
    assert SECRET not in text and "visible?" not in text and data["truncated"] is False
    big = chunk_event_data({"text": "x" * 5000}, secrets=[], max_bytes=100)
    assert big["truncated"] is True and big["bytes"] > 5000
    assert len(big["data"].encode()) <= 100 and big["data"].startswith('{"text":"xxx')
