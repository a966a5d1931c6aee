from __future__ import annotations

import pytest

from agent_operator.settings import OperatorSettings


def test_defaults_and_overrides_from_env() -> None:
    assert OperatorSettings.from_env({}).namespaces == ()
    settings = OperatorSettings.from_env(
        {
            "AGENT_OPERATOR_NAMESPACES": "team-a, team-b",
            "AGENT_OPERATOR_PEERING": "agent-engine",
            "AGENT_OPERATOR_OE_POD_LABELS": "app=oe,tier=platform",
            "AGENT_OPERATOR_RESYNC_SECONDS": "30",
        }
    )
    assert settings.namespaces == ("team-a", "team-b")
    assert settings.peering == "agent-engine"
    assert settings.render.oe_pod_labels == {"app": "oe", "tier": "platform"}
    assert settings.resync_seconds == 30.0


def test_malformed_labels_name_the_variable() -> None:
    with pytest.raises(ValueError, match="AGENT_OPERATOR_OE_POD_LABELS"):
        OperatorSettings.from_env({"AGENT_OPERATOR_OE_POD_LABELS": "novalue"})


def test_default_image_and_log_format_from_env() -> None:
    settings = OperatorSettings.from_env(
        {"AGENT_OPERATOR_DEFAULT_IMAGE": "agent-engine/runtime:0.1.0", "AGENT_OPERATOR_LOG_FORMAT": "text"}
    )
    assert settings.render.default_image == "agent-engine/runtime:0.1.0"
    assert settings.log_format == "text"
    assert OperatorSettings.from_env({}).log_format == "json"
    with pytest.raises(ValueError, match="AGENT_OPERATOR_LOG_FORMAT='xml': write json or text"):
        OperatorSettings.from_env({"AGENT_OPERATOR_LOG_FORMAT": "xml"})
