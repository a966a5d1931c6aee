"""`LightTracer` makes the spans the SDK's tracer makes (agent_runtime.light_spans): the same OTLP request
once ids and times are set alike, the same sampling under a parent, the SDK's own path under any other
sampler; a span changes nothing once ended."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, TraceIdRatioBased
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from agent_runtime.light_spans import LightSpan, LightTracer

pytestmark = pytest.mark.unit


class _Kept(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def _provider(kept: _Kept, **kwargs: object) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-engine-oe"}), **kwargs)  # type: ignore[arg-type]
    provider.add_span_processor(SimpleSpanProcessor(kept))
    return provider


def _parent(flags: int) -> trace.Context:  # type: ignore[name-defined]
    remote = SpanContext(
        0x4BF92F3577B34DA6A3CE929D0E0E4736,
        0x00F067AA0BA902B7,
        is_remote=True,
        trace_flags=TraceFlags(flags),
        trace_state=TraceState([("vendor", "a")]),
    )
    return trace.set_span_in_context(NonRecordingSpan(remote))


_VALUES = st.one_of(
    st.text(max_size=20),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.binary(max_size=8),
    st.lists(st.text(max_size=5), max_size=3),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(
    attributes=st.dictionaries(st.text(min_size=1, max_size=12), _VALUES, max_size=6),
    later=st.dictionaries(st.text(min_size=1, max_size=12), _VALUES, max_size=4),
    kind=st.sampled_from(list(SpanKind)),
    error=st.booleans(),
)
def test_a_light_span_exports_as_the_sdks_span_does(
    attributes: dict[str, object], later: dict[str, object], kind: SpanKind, error: bool
) -> None:
    kept = _Kept()
    provider = _provider(kept)
    sdk = provider.get_tracer("agent_runtime")
    light = LightTracer(sdk)  # type: ignore[arg-type]
    context = _parent(1)
    link = Link(trace.get_current_span(context).get_span_context(), {"why": "resume"})
    for tracer in (sdk, light):
        span = tracer.start_span("chat main", kind=kind, attributes=attributes, context=context, links=[link])
        span.set_attributes(later)
        if error:
            span.set_status(Status(StatusCode.ERROR, "ToolError"))
        span.end(end_time=2_000)
    made_by_sdk, made_light = kept.spans
    assert isinstance(made_light, LightSpan) and not isinstance(made_light, SdkSpan)
    # Ids and the start time are each tracer's own; everything else must be the same request.
    made_light._context = made_by_sdk.get_span_context()
    made_light._start_time = made_by_sdk.start_time
    assert encode_spans([made_light]) == encode_spans([made_by_sdk])


def test_sampling_follows_the_parent_and_a_root_is_sampled() -> None:
    kept = _Kept()
    light = LightTracer(_provider(kept).get_tracer("agent_runtime"))  # type: ignore[arg-type]
    unsampled = light.start_span("step", context=_parent(0))
    assert not unsampled.is_recording() and not unsampled.get_span_context().trace_flags.sampled
    assert unsampled.get_span_context().trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
    sampled = light.start_span("step", context=_parent(1))
    assert sampled.is_recording() and sampled.get_span_context().trace_state == TraceState([("vendor", "a")])
    root = light.start_span("step")
    assert root.is_recording() and root.get_span_context().trace_id != sampled.get_span_context().trace_id
    for span in (unsampled, sampled, root):
        span.end()
    assert [span.name for span in kept.spans] == ["step", "step"]


@pytest.mark.parametrize("sampler", [ALWAYS_OFF, TraceIdRatioBased(0.5)])
def test_another_sampler_is_the_sdks_to_apply(sampler: object) -> None:
    kept = _Kept()
    light = LightTracer(_provider(kept, sampler=sampler).get_tracer("agent_runtime"))  # type: ignore[arg-type]
    span = light.start_span("step")
    assert not isinstance(span, LightSpan)


def test_an_ended_span_changes_no_more_and_ends_once() -> None:
    kept = _Kept()
    light = LightTracer(_provider(kept).get_tracer("agent_runtime"))  # type: ignore[arg-type]
    span = light.start_span("step", attributes={"agent.step": 1})
    span.set_status(Status(StatusCode.OK))
    span.set_status(Status(StatusCode.ERROR, "late"))  # OK stays OK, as the SDK has it
    span.end()
    span.set_attribute("agent.decision", "allow")
    span.end()
    assert len(kept.spans) == 1
    assert dict(kept.spans[0].attributes or {}) == {"agent.step": 1}
    assert kept.spans[0].status.status_code is StatusCode.OK


def test_a_none_or_an_empty_key_is_not_kept() -> None:
    kept = _Kept()
    light = LightTracer(_provider(kept).get_tracer("agent_runtime"))  # type: ignore[arg-type]
    span = light.start_span("step", attributes={"agent.route": None, "": 1, "agent.step": 2})
    span.set_attributes({"agent.decision": None, "": "x", "agent.from_cache": False})
    span.end()
    assert dict(kept.spans[0].attributes or {}) == {"agent.step": 2, "agent.from_cache": False}
