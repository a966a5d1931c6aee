"""The chart's observability values reach every Agent component through the operator (issue 33): the OTel
and execution-log variables in AGENT_OPERATOR_TELEMETRY_ENV, checked, rendered into the AER, the Tool Pod and
the Memory server alike; any other name is refused naming the setting."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_operator.reconcile import plan_agent
from agent_operator.settings import OperatorSettings, RenderSettings
from tests.unit.operator.specimens import agent_body, inputs

pytestmark = pytest.mark.unit

TELEMETRY = {
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.monitoring:4318",
    "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
    "OTEL_TRACES_SAMPLER_ARG": "0.25",
    "AGENTIC_EXECUTION_LOG": "jsonl",
}


def _deployments(settings: RenderSettings) -> dict[str, dict[str, Any]]:
    agent = agent_body(components={"memory": {"enabled": True}})
    plan = plan_agent(inputs(agent=agent), settings=settings)
    return {
        d.manifest["metadata"]["name"]: d.manifest for d in plan.objects if d.manifest["kind"] == "Deployment"
    }


def _env(deployment: dict[str, Any]) -> dict[str, Any]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in container["env"]}


def test_the_telemetry_variables_reach_every_component() -> None:
    settings = OperatorSettings.from_env({"AGENT_OPERATOR_TELEMETRY_ENV": json.dumps(TELEMETRY)}).render
    deployments = _deployments(settings)
    assert len(deployments) == 3  # AER, Tool Pod, Memory
    for name, deployment in deployments.items():
        env = _env(deployment)
        assert {key: env.get(key) for key in TELEMETRY} == TELEMETRY, name
    # Without the setting nothing is added (the golden files stay as they are).
    for deployment in _deployments(RenderSettings()).values():
        assert not [key for key in _env(deployment) if key.startswith(("OTEL_", "AGENTIC_TRACING"))]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ('{"RUNNER_MODE": "tool"}', "'RUNNER_MODE' is not a telemetry variable"),
        ('{"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer x"}', "is not a telemetry variable"),
        ('{"OTEL_TRACES_SAMPLER_ARG": 0.5}', "must be a string"),
        ("[1]", "must be a JSON object"),
        ("{oops", "not JSON"),
    ],
)
def test_anything_but_telemetry_variables_is_refused_naming_the_setting(value: str, problem: str) -> None:
    with pytest.raises(ValueError, match="AGENT_OPERATOR_TELEMETRY_ENV") as raised:
        OperatorSettings.from_env({"AGENT_OPERATOR_TELEMETRY_ENV": value})
    assert problem in str(raised.value)
