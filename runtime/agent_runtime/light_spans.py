"""Spans for the hot paths (a step, a model call, a provider request): the SDK's span model, made cheaply.

The SDK's `Tracer.start_span` asks the sampler for a result object, builds bounded, locked attribute and
event containers that clean every value, and copies the span into a new `ReadableSpan` when it ends; for
the few spans a step makes, that was most of what tracing cost the step (issue 33). A `LightSpan` is the
readable span itself: plain containers, filled only by the platform's own code (scalar attributes, a
handful per span), handed to the provider's span processors as it is when it ends.

Used only with the default sampler (`parentbased_always_on`, whose decision is the parent's sampled flag or
yes for a root): with any other sampler `LightTracer` defers to the SDK's tracer, so sampling stays the
SDK's. Ids come from the provider's id generator; the span processors see `on_start` and `on_end` as they
do for the SDK's spans.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from time import time_ns
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.sampling import DEFAULT_ON
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

_SCALARS = (str, bool, int, float, bytes)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)


def _clean(value: Any) -> Any:
    """A value the platform's attributes hold (a scalar, a sequence of them as a tuple), else None: the SDK
    would keep a None as an empty value, the platform never sets one (`tracing.set_attributes` skips it)."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Sequence) and all(isinstance(item, _SCALARS) for item in value):
        return tuple(value)
    return None


class LightSpan(ReadableSpan, trace_api.Span):
    """A recording span that is its own readable form; changes after `end` are ignored, as the SDK's are."""

    def __init__(
        self,
        name: str,
        *,
        tracer: SdkTracer,
        context: SpanContext,
        parent: SpanContext | None,
        kind: SpanKind,
        attributes: dict[str, Any],
        links: Sequence[Link],
    ) -> None:
        # ReadableSpan.__init__ would make an empty Resource when none is given: every field is set here.
        self._name = name
        self._context = context
        self._parent = parent
        self._kind = kind
        self._attributes = attributes
        self._events: list[Event] = []
        self._links = links
        self._resource = tracer.resource
        self._instrumentation_scope = tracer._instrumentation_scope
        self._instrumentation_info = tracer.instrumentation_info
        self._status = Status(StatusCode.UNSET)
        self._processor = tracer.span_processor
        self._end_time: int | None = None
        self._start_time = time_ns()

    def get_span_context(self) -> SpanContext:
        return self._context

    def is_recording(self) -> bool:
        return self._end_time is None

    def set_attribute(self, key: str, value: Any) -> None:
        if self._end_time is None and key and (cleaned := _clean(value)) is not None:
            self._attributes.pop(key, None)  # a key set again goes last, as in the SDK's attributes
            self._attributes[key] = cleaned

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        # The SDK's rule: once OK, a span's status stays OK.
        if self._end_time is not None or self._status.status_code is StatusCode.OK:
            return
        self._status = status if isinstance(status, Status) else Status(status, description)

    def update_name(self, name: str) -> None:
        if self._end_time is None:
            self._name = name

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        if self._end_time is None:
            self._events.append(Event(name, dict(attributes or {}), timestamp or time_ns()))

    def record_exception(
        self,
        exception: BaseException,
        attributes: Any = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        # The type only: a platform exception's message may quote a call's arguments.
        self.add_event("exception", {"exception.type": type(exception).__name__}, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self._end_time is not None:
            return
        self._end_time = end_time if end_time is not None else time_ns()
        self._processor._on_ending(self)
        self._processor.on_end(self)


class LightTracer:
    """`start_span` as the SDK's tracer has it, making `LightSpan`s under the default sampler."""

    def __init__(self, tracer: SdkTracer) -> None:
        self._tracer = tracer
        self._light = tracer.sampler is DEFAULT_ON
        self._ids = tracer.id_generator

    def start_span(
        self,
        name: str,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        context: otel_context.Context | None = None,
        links: Sequence[Link] = (),
    ) -> trace_api.Span:
        if not self._light:
            return self._tracer.start_span(
                name, context=context, kind=kind, attributes=attributes, links=links
            )
        parent: SpanContext | None = trace_api.get_current_span(context).get_span_context()
        if parent is None or not parent.is_valid:
            parent = None
            trace_id = self._ids.generate_trace_id()
            flags = (
                TraceFlags(_SAMPLED | TraceFlags.RANDOM_TRACE_ID)
                if self._ids.is_trace_id_random()
                else _SAMPLED
            )
            trace_state = None
        else:
            trace_id = parent.trace_id
            flags = _SAMPLED if parent.trace_flags.sampled else _NOT_SAMPLED
            if parent.trace_flags.random_trace_id:
                flags = TraceFlags(flags | TraceFlags.RANDOM_TRACE_ID)
            trace_state = parent.trace_state
        span_context = SpanContext(
            trace_id,
            self._ids.generate_span_id(),
            is_remote=False,
            trace_flags=flags,
            trace_state=trace_state,
        )
        if not flags.sampled:
            return trace_api.NonRecordingSpan(span_context)
        cleaned = {}
        for key, value in (attributes or {}).items():
            if key and (kept := _clean(value)) is not None:
                cleaned[key] = kept
        span = LightSpan(
            name,
            tracer=self._tracer,
            context=span_context,
            parent=parent,
            kind=kind,
            attributes=cleaned,
            links=tuple(links),
        )
        self._tracer.span_processor.on_start(span, parent_context=context)
        return span
