"""The chart's observability values (issue 33): tracing and execution-log variables into the OE and, through
the operator, every component; prices into the OE; a ServiceMonitor, a PrometheusRule and the dashboard
behind their switches. promtool's checks of the rule are in tests/integration/observability."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_operator.settings import OperatorSettings
from agent_runtime.oe.usage import prices_from_env
from agent_runtime.servers.oe_metrics import OEMetrics
from tests.unit.test_chart_render import CHART, NS, OE, OPERATOR, helm, matches, one, pod, render

__all__ = ["helm"]  # the module-scoped fixture, shared

pytestmark = pytest.mark.unit

OBSERVED = {
    "observability.tracing.otlpEndpoint": "http://otel-collector.monitoring:4318",
    "observability.tracing.sampler": "parentbased_traceidratio",
    "observability.tracing.samplerArg": "0.5",
    "observability.executionLog.sinks[0]": "jsonl",
    "pricing.models.gpt-x.input": "3",  # (--set makes 2.5 a string)
    "pricing.models.gpt-x.output": "10",
    "metrics.serviceMonitor.enabled": "true",
    "metrics.serviceMonitor.labels.release": "prometheus",
    "metrics.prometheusRule.enabled": "true",
    "metrics.dashboard.enabled": "true",
}


def _env(docs: list[dict], name: str) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod(one(docs, "Deployment", name))["containers"][0]["env"]}


def _observed(helm: Path) -> list[dict]:
    return render(helm, **{key.replace(".", "__"): value for key, value in OBSERVED.items()})


def test_nothing_is_rendered_or_set_by_default(helm: Path) -> None:
    docs = render(helm)
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"ServiceMonitor", "PrometheusRule"}
    assert not [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard")]
    oe_env = _env(docs, OE)
    assert not [k for k in oe_env if k.startswith(("OTEL_", "AGENTIC_TRACING", "AGENTIC_EXECUTION_LOG"))]
    assert "OE_PRICES" not in oe_env
    assert _env(docs, OPERATOR)["AGENT_OPERATOR_TELEMETRY_ENV"] == "{}"


def test_the_observability_values_reach_the_oe_and_through_the_operator_every_component(helm: Path) -> None:
    docs = _observed(helm)
    wanted = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.monitoring:4318",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.5",
        "AGENTIC_EXECUTION_LOG": "jsonl",
    }
    oe_env = _env(docs, OE)
    assert {k: oe_env.get(k) for k in wanted} == wanted
    operator_env = _env(docs, OPERATOR)
    telemetry = {"AGENT_OPERATOR_TELEMETRY_ENV": operator_env["AGENT_OPERATOR_TELEMETRY_ENV"]}
    settings = OperatorSettings.from_env(telemetry)  # what the operator parses, checked
    assert settings.render.telemetry_env == wanted
    prices = prices_from_env(oe_env)
    assert prices.currency == "USD" and prices.price_of("gpt-x") is not None
    assert prices.price_of("gpt-x").output == 10  # type: ignore[union-attr]


def test_the_service_monitor_scrapes_the_oe_service_keeping_the_agents_namespace_label(helm: Path) -> None:
    docs = _observed(helm)
    monitor = one(docs, "ServiceMonitor", OE)
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    service = one(docs, "Service", OE)
    assert matches(monitor["spec"]["selector"], service["metadata"]["labels"])
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NS]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics" and endpoint["honorLabels"] is True


def test_the_rules_and_the_dashboard_name_only_metrics_the_oe_exposes(helm: Path) -> None:
    docs = _observed(helm)
    exposed = {metric.name for metric in OEMetrics().registry.collect()}
    rule = one(docs, "PrometheusRule", OE)
    alerts = {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert set(alerts) == {
        "AgentEngineExecutionsFailing",
        "AgentEngineApprovalWaitingTooLong",
        "AgentEngineToolPodUnreachable",
    }
    dashboard_map = next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard")
    )
    dashboard = json.loads(dashboard_map["data"]["agent-engine.json"])
    assert dashboard == json.loads((CHART / "dashboards" / "agent-engine.json").read_text())
    exprs = [*alerts.values(), *(t["expr"] for p in dashboard["panels"] for t in p["targets"])]
    for expr in exprs:
        used = {word for word in _words(expr) if word.startswith("agent_engine_")}
        assert used, expr
        for name in used:
            base = name.removesuffix("_total").removesuffix("_bucket").removesuffix("_count")
            assert base in exposed, (name, sorted(exposed))


def _words(expr: str) -> set[str]:
    import re

    return set(re.findall(r"[a-zA-Z_][a-zA-Z0-9_]*", expr))
