"""Prometheus metrics of the Orchestration Engine: executions by outcome, steps by decision."""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    generate_latest,
)


class OEMetrics:
    """One registry per app, so two OEs in one test process never share counters."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)
        self._created = Counter(
            "agent_engine_oe_executions_created", "Executions created.", registry=self.registry
        )
        self._finished = Counter(
            "agent_engine_oe_execution_callbacks",
            "Runs ended by the AER's callback, by the state they led to.",
            ["state"],
            registry=self.registry,
        )
        self._steps = Counter(
            "agent_engine_oe_steps",
            "Intercepted calls answered, by outcome (success, error, suspend, deny, callback) and cache use.",
            ["outcome", "cached"],
            registry=self.registry,
        )

    def execution_created(self) -> None:
        self._created.inc()

    def execution_finished(self, state: str) -> None:
        self._finished.labels(state).inc()

    def step(self, *, decision: str, cached: bool) -> None:
        self._steps.labels(decision, "true" if cached else "false").inc()

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
