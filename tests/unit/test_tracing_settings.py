"""Tracing and execution-log settings (issue 33): which exporters and sinks the environment asks for, and a
clear error naming the variable for a bad one; what an OE event becomes in the log."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime.execution_log import ExecutionLogError, LogSettings, jsonl_path
from agent_runtime.oe.logged_events import log_fields
from agent_runtime.oe.store.base import EventRecord
from agent_runtime.tracing import TracingConfigError, selected_exporters

pytestmark = pytest.mark.unit


def test_exporters_follow_the_standard_variables_and_the_platforms() -> None:
    assert selected_exporters({}) == ()
    assert selected_exporters({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) == ("otlp",)
    assert selected_exporters({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}) == ("otlp",)
    assert selected_exporters({"AGENTIC_TRACING_EXPORTER": "jsonl, otlp,jsonl"}) == ("jsonl", "otlp")
    assert selected_exporters({"AGENTIC_TRACING_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"}) == ()
    off = {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    assert selected_exporters(off) == ()


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"AGENTIC_TRACING_EXPORTER": "zipkin"}, "unknown exporter 'zipkin'"),
        ({"AGENTIC_TRACING_EXPORTER": "mongodb"}, "needs MONGODB_URI"),
    ],
)
def test_a_bad_exporter_names_the_variable(env: dict[str, str], words: str) -> None:
    with pytest.raises(TracingConfigError, match="AGENTIC_TRACING_EXPORTER") as raised:
        selected_exporters(env)
    assert words in str(raised.value)


def test_execution_log_sinks_and_their_errors() -> None:
    assert LogSettings.from_env({}).sinks == ()
    settings = LogSettings.from_env({"AGENTIC_EXECUTION_LOG": "jsonl,mongodb", "MONGODB_URI": "mongodb://m/"})
    assert settings.sinks == ("jsonl", "mongodb") and settings.collection == "execution_logs"
    with pytest.raises(ExecutionLogError, match="AGENTIC_EXECUTION_LOG: unknown sink 'kafka'"):
        LogSettings.from_env({"AGENTIC_EXECUTION_LOG": "kafka"})
    with pytest.raises(ExecutionLogError, match="needs AGENTIC_EXECUTION_LOG_MONGODB_URI"):
        LogSettings.from_env({"AGENTIC_EXECUTION_LOG": "mongodb"})


@pytest.mark.parametrize("execution_id", ["../etc/passwd", "a/b", "", ".hidden", "x y"])
def test_an_execution_id_that_is_not_a_plain_name_never_names_a_file(execution_id: str) -> None:
    with pytest.raises(ValueError, match="cannot name a log file"):
        jsonl_path(Path("/tmp/executions"), execution_id, "oe")


def test_an_event_becomes_names_and_states_never_payloads() -> None:
    event = EventRecord(
        execution_id="e1",
        seq=3,
        type="suspended",
        step=2,
        data={
            "suspension": {"args": {"to": "acct-secret"}, "payload": {"q": "held"}},
            "error": {"category": "tool_error", "explanation": "card 4111..."},
            "tool": "transfer",
            "route": "tool_pod",
        },
        at=1.0,
    )
    fields = log_fields(event)
    assert fields == {
        "kind": "lifecycle",
        "event": "suspended",
        "step": 2,
        "tool": "transfer",
        "status": None,
        "detail": {"route": "tool_pod", "error_category": "tool_error"},
    }
    step = log_fields(event.model_copy(update={"type": "step_finished", "data": {"status": "success"}}))
    assert step["kind"] == "step" and step["status"] == "success"
