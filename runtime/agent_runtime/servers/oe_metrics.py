"""Prometheus metrics of the Orchestration Engine (issue 33), labelled by namespace, Agent, model and tool.

Executions by outcome, steps by kind and decision, step latency, approvals waiting and time to decision,
tokens and cost, replay hits, Tool Pod unreachable, drains: fed by the engine's `Observer` hooks
(agent_runtime.oe.observer), each from an audit record. Label values are bounded: namespaces and Agents are
the registered ones, and at most `MAX_LABEL_VALUES` models and tools per Agent get their own series (the
rest are `<other>`), since a model name comes from the provider and a tool name from the AER.
"""

from __future__ import annotations

from collections.abc import Mapping

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

from agent_runtime.oe.store.base import AuditRecord
from agent_runtime.protocol import TOOL_POD_UNREACHABLE
from agent_runtime.servers.loop_tasks import register_loop_tasks

MAX_LABEL_VALUES = 50
OTHER = "<other>"
_STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_WAIT_BUCKETS = (1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600)
_OUTCOMES = {"completed": "completed", "failed": "failed", "suspended": "suspended", "cancelled": "cancelled"}


class OEMetrics:
    """One registry per app, so two OEs in one test process never share counters."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)
        register_loop_tasks(self.registry, name="agent_engine_oe_event_loop_tasks")
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

        agent = ["namespace", "agent"]
        self._executions = Counter(
            "agent_engine_executions",
            "Executions ended (or suspended), by outcome.",
            [*agent, "outcome"],
            registry=self.registry,
        )
        self._step_count = Counter(
            "agent_engine_steps",
            "Governed calls, by kind (tool, llm), the OE's decision and tool.",
            [*agent, "kind", "decision", "tool"],
            registry=self.registry,
        )
        self._step_latency = Histogram(
            "agent_engine_step_duration_seconds",
            "How long a call ran where it was routed (Tool Pod or AER), by kind and tool.",
            [*agent, "kind", "tool"],
            buckets=_STEP_BUCKETS,
            registry=self.registry,
        )
        self._replays = Counter(
            "agent_engine_replay_hits",
            "Calls answered from the replay cache on a resume.",
            agent,
            registry=self.registry,
        )
        self._unreachable = Counter(
            "agent_engine_tool_pod_unreachable",
            "Calls that failed because the Tool Pod could not be reached.",
            agent,
            registry=self.registry,
        )
        self._tokens = Counter(
            "agent_engine_tokens",
            "Tokens the models reported, by model and type (input, output, cached; cached is part of input).",
            [*agent, "model", "type"],
            registry=self.registry,
        )
        self._cost = Counter(
            "agent_engine_cost",
            "What the model calls cost under the price table (its currency), by model.",
            [*agent, "model"],
            registry=self.registry,
        )
        self._waiting = Gauge(
            "agent_engine_approvals_waiting",
            "Executions suspended, waiting for a human's decision.",
            agent,
            registry=self.registry,
        )
        self._oldest = Gauge(
            "agent_engine_approval_oldest_wait_seconds",
            "How long the longest-waiting suspended execution has waited for its decision (0: none waits).",
            agent,
            registry=self.registry,
        )
        self._wait = Histogram(
            "agent_engine_approval_wait_seconds",
            "How long a suspended execution waited for its decision, by decision.",
            [*agent, "decision"],
            buckets=_WAIT_BUCKETS,
            registry=self.registry,
        )
        self._drains = Counter(
            "agent_engine_drains",
            "Drains (of cancelled executions) and interrupts (of calls) ended, by kind and state.",
            [*agent, "kind", "state"],
            registry=self.registry,
        )
        self._seen: dict[tuple[str, str], set[str]] = {}

    def execution_created(self) -> None:
        self._created.inc()

    # the engine's Observer -------------------------------------------------------------------------------

    def audited(self, record: AuditRecord) -> None:
        """One audit record: a step, a callback, a cancel, a drain."""
        where = _where(record.agent)
        if record.kind in ("tool", "llm"):
            self._step(record, where)
        elif record.kind == "callback" and record.status == "accepted" and record.decision in _OUTCOMES:
            self._executions.labels(*where, _OUTCOMES[record.decision]).inc()
        elif record.kind == "cancel" and record.status == "accepted":
            self._executions.labels(*where, "cancelled").inc()
        elif record.kind in ("drain", "interrupt") and record.decision != "open":
            self._drains.labels(*where, record.kind, record.decision).inc()

    def _step(self, record: AuditRecord, where: tuple[str, str]) -> None:
        tool = self._bounded(record.agent, "tool", record.tool or "")
        self._step_count.labels(*where, record.kind, record.decision, tool).inc()
        if record.decision == "cached":
            self._replays.labels(*where).inc()
        if record.error_category == TOOL_POD_UNREACHABLE:
            self._unreachable.labels(*where).inc()
        if record.duration_ms and not record.from_cache:
            self._step_latency.labels(*where, record.kind, tool).observe(record.duration_ms / 1000)
        if record.usage is not None and not record.from_cache and record.decision != "joined":
            model = self._bounded(record.agent, "model", record.model or "unknown")
            for kind, count in (
                ("input", record.usage.input_tokens),
                ("output", record.usage.output_tokens),
                ("cached", record.usage.cached_tokens),
            ):
                self._tokens.labels(*where, model, kind).inc(count)
            if record.cost is not None:
                self._cost.labels(*where, model).inc(record.cost)

    def execution_failed(self, agent: str, category: str) -> None:
        self._executions.labels(*_where(agent), "failed").inc()

    def decided(self, agent: str, decision: str, waited_s: float) -> None:
        self._wait.labels(*_where(agent), decision).observe(waited_s)

    def approvals_waiting(self, counts: Mapping[str, int], oldest_s: Mapping[str, float]) -> None:
        """Set the gauges from the suspended executions per Agent (a periodic read of the store): how many,
        and how long the oldest has waited."""
        self._waiting.clear()
        self._oldest.clear()
        for agent, count in counts.items():
            self._waiting.labels(*_where(agent)).set(count)
            self._oldest.labels(*_where(agent)).set(oldest_s.get(agent, 0.0))

    def _bounded(self, agent: str, kind: str, value: str) -> str:
        seen = self._seen.setdefault((agent, kind), set())
        if value in seen:
            return value
        if len(seen) >= MAX_LABEL_VALUES:
            return OTHER
        seen.add(value)
        return value

    def execution_finished(self, state: str) -> None:
        self._finished.labels(state).inc()

    def step(self, *, decision: str, cached: bool) -> None:
        self._steps.labels(decision, "true" if cached else "false").inc()

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _where(agent: str) -> tuple[str, str]:
    namespace, _, name = agent.partition("/")
    return namespace, name or namespace
