"""The OE's metric labels stay bounded (issue 33): at most MAX_LABEL_VALUES tool and model names per Agent,
the rest counted under `<other>`, so a tenant cannot grow the series without end; each Agent has its own."""

from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent_runtime.oe.store.base import AuditRecord
from agent_runtime.oe.usage import Usage
from agent_runtime.servers.oe_metrics import MAX_LABEL_VALUES, OTHER, OEMetrics

pytestmark = pytest.mark.unit


def _step(agent: str, tool: str, *, model: str | None = None) -> AuditRecord:
    return AuditRecord(
        execution_id="e1",
        step=1,
        agent=agent,
        workspace_id=agent.replace("/", "."),
        kind="llm" if model else "tool",
        tool=tool,
        decision="allow",
        status="success",
        duration_ms=3.0,
        usage=Usage(input_tokens=2, output_tokens=1) if model else None,
        model=model,
        cost=0.5 if model else None,
        at=time.time(),
    )


def _labels(metrics: OEMetrics, name: str, label: str, agent: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics.exposition()[0].decode()):
        for sample in family.samples:
            if sample.name == name and sample.labels.get("agent") == agent:
                out[sample.labels[label]] = out.get(sample.labels[label], 0) + sample.value
    return out


def test_tool_and_model_labels_are_bounded_per_agent() -> None:
    metrics = OEMetrics()
    extra = 7
    for index in range(MAX_LABEL_VALUES + extra):
        metrics.audited(_step("team-a/bot", f"tool_{index}"))
        metrics.audited(_step("team-a/bot", "invoke_llm", model=f"model-{index}"))
    metrics.audited(_step("team-a/bot", "tool_0"))  # a name seen before keeps its own series
    tools = _labels(metrics, "agent_engine_steps_total", "tool", "bot")
    # invoke_llm (the model steps' tool) took one of the names: tool_0 .. tool_48 have their own series.
    assert len(tools) == MAX_LABEL_VALUES + 1 and tools[OTHER] == extra + 1
    assert tools["invoke_llm"] == MAX_LABEL_VALUES + extra
    assert tools["tool_0"] == 2
    models = _labels(metrics, "agent_engine_cost_total", "model", "bot")
    assert len(models) == MAX_LABEL_VALUES + 1 and models[OTHER] == pytest.approx(0.5 * extra)
    # Another Agent's names are its own budget.
    metrics.audited(_step("team-b/other", "tool_new"))
    assert _labels(metrics, "agent_engine_steps_total", "tool", "other") == {"tool_new": 1}
