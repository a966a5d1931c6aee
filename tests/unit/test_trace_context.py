"""The W3C trace context read and written by hand (agent_runtime.tracing, issue 33) agrees with the SDK's own
propagator on every header, valid or not."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agent_runtime import tracing

pytestmark = pytest.mark.unit

_SDK = TraceContextTextMapPropagator()
_HEX = "0123456789abcdef"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def _sdk(traceparent: str, tracestate: str | None) -> trace.SpanContext | None:
    carrier = {"traceparent": traceparent, **({"tracestate": tracestate} if tracestate is not None else {})}
    span_context = trace.get_current_span(_SDK.extract(carrier)).get_span_context()
    return span_context if span_context.is_valid else None


def _ours(traceparent: str, tracestate: str | None) -> trace.SpanContext | None:
    raw = [(b"host", b"oe"), (b"traceparent", traceparent.encode("latin-1"))]
    if tracestate is not None:
        raw.append((b"tracestate", tracestate.encode("latin-1")))
    context = tracing._caller_context(raw)
    return None if context is None else trace.get_current_span(context).get_span_context()


@pytest.mark.parametrize(
    "traceparent",
    [
        f"00-{TRACE}-{SPAN}-01",
        f"00-{TRACE}-{SPAN}-00",
        f"  00-{TRACE}-{SPAN}-01 ",
        f"01-{TRACE}-{SPAN}-01-future",  # a later version may add fields
        f"00-{TRACE}-{SPAN}-01-extra",  # version 00 has exactly four
        f"ff-{TRACE}-{SPAN}-01",
        f"00-{'0' * 32}-{SPAN}-01",
        f"00-{TRACE}-{'0' * 16}-01",
        f"00-{TRACE.upper()}-{SPAN}-01",
        f"00-{TRACE[:-1]}-{SPAN}-01",
        f"00-{TRACE}-{SPAN}",
        "",
        "garbage",
    ],
)
def test_each_traceparent_reads_as_the_sdk_reads_it(traceparent: str) -> None:
    assert _ours(traceparent, None) == _sdk(traceparent, None)


@pytest.mark.parametrize("tracestate", ["vendor=a,other=b", "", "bad state", "k=" + "v" * 600])
def test_tracestate_travels_as_the_sdk_carries_it(tracestate: str) -> None:
    ours, sdk = _ours(f"00-{TRACE}-{SPAN}-01", tracestate), _sdk(f"00-{TRACE}-{SPAN}-01", tracestate)
    assert ours is not None and sdk is not None
    assert ours.trace_state == sdk.trace_state


@settings(max_examples=300, deadline=None)
@given(
    version=st.text(_HEX + "xG", min_size=2, max_size=2),
    trace_id=st.text(_HEX + "A", min_size=31, max_size=33),
    span_id=st.text(_HEX, min_size=15, max_size=17),
    flags=st.text(_HEX, min_size=1, max_size=3),
    rest=st.sampled_from(["", "-x", "-"]),
)
def test_any_traceparent_reads_as_the_sdk_reads_it(
    version: str, trace_id: str, span_id: str, flags: str, rest: str
) -> None:
    header = f"{version}-{trace_id}-{span_id}-{flags}{rest}"
    assert _ours(header, None) == _sdk(header, None)


def test_what_is_written_is_what_the_sdk_writes() -> None:
    remote = tracing.parse_w3c(f"00-{TRACE}-{SPAN}-01", "vendor=a")
    assert remote is not None
    span = trace.get_current_span(remote)
    ours: dict[str, str] = {}
    tracing._write_w3c(span.get_span_context(), ours)
    sdk: dict[str, str] = {}
    _SDK.inject(sdk, context=remote)
    assert ours == sdk == {"traceparent": f"00-{TRACE}-{SPAN}-01", "tracestate": "vendor=a"}
    assert tracing.traceparent_of(span) == sdk["traceparent"]
    assert tracing.traceparent_of(trace.INVALID_SPAN) is None
    assert tracing.context_of(None) is None and tracing.context_of("garbage") is None
