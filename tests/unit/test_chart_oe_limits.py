"""The chart's policy settings (issue 34): `oe.limits` becomes OE_DEFAULT_LIMITS, which the OE parses as
spec.limits fields (an Agent's own win); `oe.auditExport.otlp` becomes the audit export stream's endpoint and
its headers from a Secret (never a value in the rendered manifest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_runtime.oe.limiter import default_limits_from_env
from tests.unit.test_chart_render import OE, helm, one, pod, refused, render

__all__ = ["helm"]  # the module-scoped fixture, shared

pytestmark = pytest.mark.unit


def _env(docs: list[dict]) -> dict[str, dict]:
    return {e["name"]: e for e in pod(one(docs, "Deployment", OE))["containers"][0]["env"]}


def test_the_charts_limits_are_the_oes_defaults(helm: Path) -> None:
    docs = render(helm, oe__limits__maxStepsPerExecution="200", oe__limits__maxCostPerDay="50")
    text = _env(docs)["OE_DEFAULT_LIMITS"]["value"]
    assert json.loads(text) == {"maxStepsPerExecution": 200, "maxCostPerDay": 50}
    limits = default_limits_from_env({"OE_DEFAULT_LIMITS": text})
    assert limits is not None and (limits.max_steps_per_execution, limits.max_cost_per_day) == (200, 50)
    assert "OE_DEFAULT_LIMITS" not in _env(render(helm))  # none set: none rendered


def test_a_bad_default_names_the_setting() -> None:
    with pytest.raises(ValueError, match="OE_DEFAULT_LIMITS"):
        default_limits_from_env({"OE_DEFAULT_LIMITS": '{"maxStepsPerExecution": 0}'})


def test_the_charts_audit_export_is_the_oes_otlp_endpoint_with_headers_from_a_secret(helm: Path) -> None:
    docs = render(
        helm,
        oe__auditExport__otlp__endpoint="http://otel-collector.observability:4318",
        oe__auditExport__otlp__headersSecret__name="otlp-auth",
    )
    env = _env(docs)
    assert env["OE_AUDIT_EXPORT_OTLP_ENDPOINT"]["value"] == "http://otel-collector.observability:4318"
    assert env["OE_AUDIT_EXPORT_OTLP_HEADERS"]["valueFrom"] == {
        "secretKeyRef": {"name": "otlp-auth", "key": "headers"}
    }
    plain = _env(render(helm))
    assert "OE_AUDIT_EXPORT_OTLP_ENDPOINT" not in plain and "OE_AUDIT_EXPORT_OTLP_HEADERS" not in plain
    assert "/oe/auditExport/otlp/endpoint" in refused(
        helm, {"oe.auditExport.otlp.endpoint": "collector:4318"}
    )
