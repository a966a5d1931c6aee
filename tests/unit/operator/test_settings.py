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
