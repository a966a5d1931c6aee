"""Encoding a batch of the platform's spans for OTLP: the SDK's encoder vs agent_runtime.otlp_spans.

The batch is what an OE exports: step spans with the GenAI attributes, run and execution spans, a server
span, in one process's resource and scope. Both encoders run on the same batch in alternating rounds;
figures are the median per span and the ratio, and the bytes (each parses to the same request: see
tests/unit/test_otlp_spans.py).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind

from agent_runtime.otlp_spans import SpanEncoder

BATCH = 512
ROUNDS = 15


class _Kept(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def _batch() -> list[ReadableSpan]:
    kept = _Kept()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "agent-engine-oe", "agent.component": "oe"})
    )
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("agent_runtime")
    while len(kept.spans) < BATCH:
        with tracer.start_as_current_span("oe POST /invoke", kind=SpanKind.SERVER) as server:
            server.set_attributes({"http.request.method": "POST", "url.path": "/invoke"})
            tracer.start_span("execution demo/agent", attributes={"agent.execution.id": "e" * 32}).end()
            with tracer.start_as_current_span("run 1", attributes={"agent.run": 1, "agent.resume": False}):
                for step in range(10):
                    model = step % 2 == 0
                    attributes = {
                        "agent.step": step,
                        "gen_ai.operation.name": "chat" if model else "execute_tool",
                    }
                    with tracer.start_as_current_span(
                        "chat main" if model else "execute_tool transfer"
                    ) as span:
                        span.set_attributes(
                            {
                                **attributes,
                                "agent.decision": "allow",
                                "agent.route": "tool_pod",
                                "agent.from_cache": False,
                                "agent.status": "success",
                                "gen_ai.request.model": "gpt-4o-mini" if model else None,
                                "gen_ai.usage.input_tokens": 812 if model else None,
                                "gen_ai.usage.output_tokens": 64 if model else None,
                            }
                        )
    return kept.spans[:BATCH]


def _per_span(encode: object, spans: list[ReadableSpan]) -> float:
    started = time.perf_counter()
    encode(spans)  # type: ignore[operator]
    return (time.perf_counter() - started) / len(spans)


def main() -> None:
    spans = _batch()
    ours = SpanEncoder()
    encoders = {"sdk": lambda batch: encode_spans(batch).SerializePartialToString(), "ours": ours.encode}
    timings: dict[str, list[float]] = {"sdk": [], "ours": []}
    for round_ in range(ROUNDS):
        for name in ("sdk", "ours") if round_ % 2 == 0 else ("ours", "sdk"):
            timings[name].append(_per_span(encoders[name], spans))
    sdk, mine = statistics.median(timings["sdk"]), statistics.median(timings["ours"])
    size_sdk, size_ours = len(encoders["sdk"](spans)), len(ours.encode(spans))
    print(f"{BATCH} spans a batch, {ROUNDS} alternating rounds:")
    print(
        f"  per span: SDK encoder {sdk * 1e6:.1f} us | by hand {mine * 1e6:.1f} us | ratio {mine / sdk:.2f}"
    )
    print(f"  bytes: SDK {size_sdk} | by hand {size_ours} ({size_ours / BATCH:.0f} per span)")


if __name__ == "__main__":
    main()
