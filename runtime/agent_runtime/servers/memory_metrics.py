"""Prometheus metrics of the Memory server: operations by kind, operation and outcome, and their latency."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

# From an in-process lookup to a search that embeds its query over HTTP.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class MemoryMetrics:
    """Labels are bounded: kinds and operations are fixed names, outcomes are status classes."""

    def __init__(self, registry: CollectorRegistry, *, component: str = "memory") -> None:
        self._component = component
        self._calls = Counter(
            "agent_runtime_memory_operations",
            "Memory operations handled, by kind, operation and outcome (ok, client_error, server_error).",
            ["component", "kind", "operation", "outcome"],
            registry=registry,
        )
        self._latency = Histogram(
            "agent_runtime_memory_operation_duration_seconds",
            "Memory operation latency inside the server, by kind and operation.",
            ["component", "kind", "operation"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )

    def observe(self, *, kind: str, operation: str, status: int, duration_s: float) -> None:
        """Record one finished operation; `kind` must already be a known kind (or "unknown")."""
        outcome = "ok" if status < 400 else "client_error" if status < 500 else "server_error"
        self._calls.labels(self._component, kind, operation, outcome).inc()
        self._latency.labels(self._component, kind, operation).observe(duration_s)
