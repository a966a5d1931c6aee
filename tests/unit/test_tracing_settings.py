"""Tracing and execution-log settings (issue 33): which exporters and sinks the environment asks for, and a
clear error naming the variable for a bad one; what an OE event becomes in the log."""

from __future__ import annotations

import json
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
        ({"AGENTIC_TRACING_EXPORTER": "mongodb"}, "needs AGENTIC_TRACING_MONGODB_URI or MONGODB_URI"),
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


def test_off_installs_nothing_and_every_hook_is_a_pass_through() -> None:
    """No exporter asked for: no provider, the app unwrapped, no aiohttp trace config, no httpx hook, and
    the OE's step span only a yield (the current span stays the invalid one)."""
    from opentelemetry import trace

    from agent_runtime import tracing
    from agent_runtime.oe import spans

    assert tracing.setup_tracing("oe", {}) is False
    assert tracing.enabled() is False

    def app() -> None:
        return None

    assert tracing.instrument(app, component="oe") is app
    headers: dict[str, str] = {}
    tracing.inject(headers)
    assert headers == {}
    assert tracing.httpx_event_hooks(asynchronous=True) == {}
    assert tracing.current_traceparent() is None and tracing.current_ids() == (None, None)
    with spans.step(step=1, tool="t", llm_id=None, is_llm=False):
        assert not trace.get_current_span().get_span_context().is_valid
    assert spans.execution_started(execution_id="e", agent="a/b") is None


def test_a_span_document_has_no_dotted_field_name_anywhere() -> None:
    """The MongoDB exporter's documents: attribute maps become {key, value} lists (FerretDB refuses dots)."""
    from agent_runtime.tracing import span_document

    span = {
        "name": "chat main",
        "context": {"trace_id": "0x01", "span_id": "0x02"},
        "attributes": {"gen_ai.usage.input_tokens": 3, "agent.tool": "x"},
        "events": [{"name": "e", "attributes": {"error.type": "t"}}],
        "links": [{"context": {}, "attributes": {"a.b": 1}}],
        "resource": {"attributes": {"service.name": "agent-engine-oe"}, "schema_url": ""},
    }
    document = span_document(json.dumps(span))

    def names(value: object) -> list[str]:
        if isinstance(value, dict):
            return [*value, *(n for item in value.values() for n in names(item))]
        if isinstance(value, list):
            return [n for item in value for n in names(item)]
        return []

    assert not [name for name in names(document) if "." in name]
    assert {"key": "gen_ai.usage.input_tokens", "value": 3} in document["attributes"]
    assert document["resource"]["attributes"] == [{"key": "service.name", "value": "agent-engine-oe"}]
