"""Prometheus metrics of tool calls: count, errors and latency per tool, and calls in flight."""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from agent_runtime.servers.loop_tasks import register_loop_tasks

# Tool calls range from sub-millisecond local work to slow provider APIs.
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
UNKNOWN_TOOL_LABEL = "<unknown>"


class ToolMetrics:
    """One registry per server, so two apps in one test process never share counters."""

    def __init__(self, *, component: str, known_tools: frozenset[str] = frozenset()) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # The process's CPU, memory, file descriptors and GC, as the default registry would expose them.
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)
        register_loop_tasks(self.registry, name="agent_runtime_event_loop_tasks")
        self._component = component
        # Tool names come from callers; only known ones become label values, so cardinality stays bounded.
        self._known_tools = known_tools
        self._calls = Counter(
            "agent_runtime_tool_calls",
            "Tool calls handled, by tool and outcome.",
            ["component", "tool", "status"],
            registry=self.registry,
        )
        self._errors = Counter(
            "agent_runtime_tool_call_errors",
            "Failed tool calls, by tool and error category.",
            ["component", "tool", "category"],
            registry=self.registry,
        )
        self._latency = Histogram(
            "agent_runtime_tool_call_duration_seconds",
            "Tool call latency inside this component, by tool.",
            ["component", "tool"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._in_flight = Gauge(
            "agent_runtime_tool_calls_in_flight",
            "Tool calls currently executing.",
            ["component"],
            registry=self.registry,
        ).labels(component)
        self._per_tool: dict[str, tuple[Counter, Counter, Histogram]] = {}

    def call_started(self) -> None:
        self._in_flight.inc()

    def call_finished(self, *, tool: str, error_category: str | None, duration_s: float) -> None:
        """Record one finished call (success when `error_category` is None)."""
        self._in_flight.dec()
        label = tool if tool in self._known_tools else UNKNOWN_TOOL_LABEL
        children = self._per_tool.get(label)
        if children is None:
            children = (
                self._calls.labels(self._component, label, "success"),
                self._calls.labels(self._component, label, "error"),
                self._latency.labels(self._component, label),
            )
            self._per_tool[label] = children
        ok, failed, latency = children
        latency.observe(duration_s)
        if error_category is None:
            ok.inc()
        else:
            failed.inc()
            self._errors.labels(self._component, label, error_category).inc()

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


# Model calls take from under a second to minutes.
_LLM_LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
# Runs of the entrypoint, from a cached replay to a long multi-step turn.
_EXECUTION_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)


class LLMMetrics:
    """Model calls in the Tool Pod (B-16): count by outcome, latency and tokens, per registered llm_id."""

    def __init__(self, registry: CollectorRegistry, *, component: str) -> None:
        self._component = component
        self._calls = Counter(
            "agent_runtime_llm_calls",
            "Model calls handled, by llm_id and outcome.",
            ["component", "llm_id", "status"],
            registry=registry,
        )
        self._latency = Histogram(
            "agent_runtime_llm_call_duration_seconds",
            "Model call latency, by llm_id.",
            ["component", "llm_id"],
            buckets=_LLM_LATENCY_BUCKETS,
            registry=registry,
        )
        self._tokens = Counter(
            "agent_runtime_llm_tokens",
            "Tokens the model reported (usage_metadata), by llm_id and kind (input, output).",
            ["component", "llm_id", "kind"],
            registry=registry,
        )

    def call_finished(
        self, *, llm_id: str, status: str, duration_s: float, usage: dict[str, object] | None = None
    ) -> None:
        """Record one call; `llm_id` must be a registered id or UNKNOWN_TOOL_LABEL (bounded labels)."""
        self._calls.labels(self._component, llm_id, status).inc()
        self._latency.labels(self._component, llm_id).observe(duration_s)
        for kind in ("input", "output"):
            count = (usage or {}).get(f"{kind}_tokens")
            if isinstance(count, int) and count > 0:
                self._tokens.labels(self._component, llm_id, kind).inc(count)


class ExecutionMetrics:
    """Runs of the entrypoint in the AER (B-16): started, finished by outcome, in flight, duration."""

    def __init__(self, registry: CollectorRegistry, *, component: str) -> None:
        self._started = Counter(
            "agent_runtime_executions_started",
            "Runs of the entrypoint started (a resume is a new run).",
            ["component"],
            registry=registry,
        ).labels(component)
        self._finished = Counter(
            "agent_runtime_executions_finished",
            "Runs of the entrypoint finished, by callback status (COMPLETED, SUSPENDED, FAILED).",
            ["component", "status"],
            registry=registry,
        )
        self._in_flight = Gauge(
            "agent_runtime_executions_in_flight",
            "Runs of the entrypoint in progress.",
            ["component"],
            registry=registry,
        ).labels(component)
        self._latency = Histogram(
            "agent_runtime_execution_duration_seconds",
            "Duration of one run of the entrypoint.",
            ["component"],
            buckets=_EXECUTION_LATENCY_BUCKETS,
            registry=registry,
        ).labels(component)
        self._component = component

    def started(self) -> None:
        self._started.inc()
        self._in_flight.inc()

    def finished(self, *, status: str, duration_s: float) -> None:
        self._in_flight.dec()
        self._finished.labels(self._component, status).inc()
        self._latency.observe(duration_s)
