"""A step's span made, made current, annotated and ended: the SDK's tracer vs agent_runtime.light_spans.

The pattern is the OE's step span (`oe/spans.step` and `annotate_step`) under a remote parent, handed to a
`BatchSpanProcessor` whose exporter drops the batch, as a traced component runs. Both tracers run in
alternating rounds in this process; figures are the median per span and their ratio.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from agent_runtime.light_spans import LightTracer

SPANS = 5_000
ROUNDS = 11


class _Dropped(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _per_span(tracer: object, parent: otel_context.Context) -> float:
    token = otel_context.attach(parent)
    started = time.perf_counter()
    for step in range(SPANS):
        span = tracer.start_span(  # type: ignore[attr-defined]
            "execute_tool transfer", attributes={"agent.step": step, "gen_ai.operation.name": "execute_tool"}
        )
        inner = otel_context.attach(trace.set_span_in_context(span))
        trace.get_current_span().set_attributes(
            {
                "agent.decision": "allow",
                "agent.route": "tool_pod",
                "agent.from_cache": False,
                "agent.status": "success",
            }
        )
        otel_context.detach(inner)
        span.end()
    elapsed = time.perf_counter() - started
    otel_context.detach(token)
    return elapsed / SPANS


def main() -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-engine-oe"}))
    provider.add_span_processor(BatchSpanProcessor(_Dropped(), max_queue_size=SPANS * 2))
    sdk = provider.get_tracer("agent_runtime")
    tracers = {"sdk": sdk, "light": LightTracer(sdk)}  # type: ignore[arg-type]
    remote = SpanContext(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0xF067AA0BA902B7, True, TraceFlags(1))
    parent = trace.set_span_in_context(NonRecordingSpan(remote))
    timings: dict[str, list[float]] = {"sdk": [], "light": []}
    for round_ in range(ROUNDS):
        for name in ("sdk", "light") if round_ % 2 == 0 else ("light", "sdk"):
            timings[name].append(_per_span(tracers[name], parent))
            provider.force_flush()
    sdk_us, light_us = (statistics.median(timings[name]) * 1e6 for name in ("sdk", "light"))
    print(f"{SPANS} step spans a round, {ROUNDS} alternating rounds:")
    ratio = light_us / sdk_us
    print(f"  per span: SDK tracer {sdk_us:.1f} us | light spans {light_us:.1f} us | ratio {ratio:.2f}")
    provider.shutdown()


if __name__ == "__main__":
    main()
