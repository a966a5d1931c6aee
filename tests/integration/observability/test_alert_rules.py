"""The chart's PrometheusRule (issue 33) checked by promtool (built with go, make observability-bins):
`promtool check rules` accepts it, and `promtool test rules` shows each alert firing on the series the OE
exposes, for the Agent they name, and staying quiet on healthy ones."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.integration.jaeger import ObservabilityBinsUnavailable, observability_bins
from tests.unit.test_chart_render import OE, helm, one, render

__all__ = ["helm"]  # the module-scoped fixture, shared

pytestmark = pytest.mark.integration

TESTS = """
rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'agent_engine_tool_pod_unreachable_total{namespace="team-a", agent="shop"}'
        values: '0 0 0 1 2 3 4 5 6 7'
      - series: 'agent_engine_tool_pod_unreachable_total{namespace="team-b", agent="calm"}'
        values: '0 0 0 0 0 0 0 0 0 0'
      - series: 'agent_engine_approval_oldest_wait_seconds{namespace="team-a", agent="shop"}'
        values: '3000+60x20'
      - series: 'agent_engine_approval_oldest_wait_seconds{namespace="team-b", agent="calm"}'
        values: '0x20'
      - series: 'agent_engine_executions_total{namespace="team-a", agent="shop", outcome="failed"}'
        values: '0+5x40'
      - series: 'agent_engine_executions_total{namespace="team-a", agent="shop", outcome="completed"}'
        values: '0+5x40'
      - series: 'agent_engine_executions_total{namespace="team-b", agent="calm", outcome="failed"}'
        values: '0x40'
      - series: 'agent_engine_executions_total{namespace="team-b", agent="calm", outcome="completed"}'
        values: '0+5x40'
    alert_rule_test:
      - eval_time: 8m
        alertname: AgentEngineToolPodUnreachable
        exp_alerts:
          - exp_labels: {severity: critical, namespace: team-a, agent: shop}
            exp_annotations:
              summary: "Agent team-a/shop: its Tool Pod could not be reached"
              description: >-
                Its tool and model calls fail as tool errors; check the Agent's Tool Pod
                (kubectl get pods -n team-a).
      - eval_time: 18m
        alertname: AgentEngineApprovalWaitingTooLong
        exp_alerts:
          - exp_labels: {severity: info, namespace: team-a, agent: shop}
            exp_annotations:
              summary: "Agent team-a/shop has an approval waiting for 1h 8m 0s"
              description: "A reviewer's decision is due: agentengine get reviews -n team-a."
      - eval_time: 35m
        alertname: AgentEngineExecutionsFailing
        exp_alerts:
          - exp_labels: {severity: warning, namespace: team-a, agent: shop}
            exp_annotations:
              summary: "Agent team-a/shop: 50% of its executions fail"
              description: >-
                Read a failed execution's error and its trace: agentengine get executions --status
                failed, then agentengine logs ID.
      - eval_time: 2m
        alertname: AgentEngineExecutionsFailing
        exp_alerts: []
"""


def _promtool() -> Path:
    try:
        return observability_bins("promtool") / "promtool"
    except ObservabilityBinsUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


def test_promtool_accepts_the_rule_and_each_alert_fires_for_the_agent_it_names(
    helm: Path, tmp_path: Path
) -> None:
    docs = render(helm, metrics__prometheusRule__enabled="true")
    rule = one(docs, "PrometheusRule", OE)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    (tmp_path / "tests.yaml").write_text(TESTS)
    promtool = _promtool()
    checked = subprocess.run(
        [str(promtool), "check", "rules", "rules.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 3 rules found" in checked.stdout
    tested = subprocess.run(
        [str(promtool), "test", "rules", "tests.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
