"""The hand-written OTLP encoder (agent_runtime.otlp_spans) writes what the SDK's own encoder means: its bytes
parse to the same `ExportTraceServiceRequest`, for every kind of span and attribute value."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from agent_runtime.otlp_spans import SpanEncoder

pytestmark = pytest.mark.unit


class _Kept(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def _tracer(kept: _Kept) -> trace.Tracer:
    provider = TracerProvider(
        resource=Resource.create({"service.name": "agent-engine-oe", "agent.component": "oe"})
    )
    provider.add_span_processor(SimpleSpanProcessor(kept))
    return provider.get_tracer("agent_runtime", "1.2.3", schema_url="https://opentelemetry.io/schemas/1.26.0")


def _same(spans: Sequence[ReadableSpan]) -> None:
    ours = ExportTraceServiceRequest.FromString(SpanEncoder().encode(spans))
    assert ours == encode_spans(spans)


REMOTE = SpanContext(
    0x4BF92F3577B34DA6A3CE929D0E0E4736,
    0x00F067AA0BA902B7,
    is_remote=True,
    trace_flags=TraceFlags(1),
    trace_state=TraceState([("vendor", "a"), ("other", "b")]),
)


def test_the_platforms_spans_encode_as_the_sdk_encodes_them() -> None:
    kept = _Kept()
    tracer = _tracer(kept)
    parent = trace.set_span_in_context(NonRecordingSpan(REMOTE))
    with tracer.start_as_current_span("oe POST /invoke", context=parent, kind=SpanKind.SERVER) as server:
        server.set_attribute("http.response.status_code", 202)
        tracer.start_span("execution demo/agent", attributes={"agent.execution.id": "e1"}).end()
        with tracer.start_as_current_span(
            "run 2 (resume)", links=[Link(REMOTE, {"why": "resume"})], attributes={"agent.resume": True}
        ):
            with tracer.start_as_current_span(
                "chat main",
                kind=SpanKind.CLIENT,
                attributes={
                    "agent.step": 0,
                    "gen_ai.operation.name": "chat",
                    "gen_ai.usage.input_tokens": 12,
                    "agent.usage.cost": 0.000125,
                    "agent.from_cache": False,
                    "gen_ai.response.finish_reasons": ["stop"],
                    "numbers": (1, -2, 2**62),
                    "negative": -1,
                    "empty": "",
                    "raw": b"\x00\x01",
                    "unicode": "prix \u00e9t\u00e9 \U0001f600",
                },
            ) as model:
                model.add_event(
                    "retry", {"attempt": 2, "agent.step": 0}
                )  # a span attribute too: field 3 here
                model.set_status(Status(StatusCode.ERROR, "Timeout"))
            tracer.start_span("execute_tool transfer", kind=SpanKind.INTERNAL).end()
    other = _tracer(kept)  # another provider: another resource and scope in the same batch
    other.start_span("POST 127.0.0.1", kind=SpanKind.PRODUCER).end()
    assert len(kept.spans) == 6
    _same(kept.spans)


def test_an_ok_status_and_a_span_without_a_parent() -> None:
    kept = _Kept()
    span = _tracer(kept).start_span("alone", kind=SpanKind.CONSUMER)
    span.set_status(Status(StatusCode.OK))
    span.end()
    _same(kept.spans)


_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(min_size=1, max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(attributes=st.dictionaries(st.text(min_size=1, max_size=10), _VALUES, max_size=6))
def test_any_attributes_encode_as_the_sdk_encodes_them(attributes: dict[str, Any]) -> None:
    kept = _Kept()
    _tracer(kept).start_span("fuzzed", attributes=attributes).end()
    _same(kept.spans)
