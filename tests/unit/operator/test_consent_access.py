"""What the operator grants the OE for a console consent (issue 37): exactly the Agent, its
authorization_code MCP Connectors and their token Secrets, by name; nothing for an Agent without one."""

from __future__ import annotations

from typing import Any

import pytest

from agent_operator.consent_access import consent_binding, consent_connectors, consent_role, token_secret
from agent_operator.models import Agent, Connector
from agent_operator.settings import RenderSettings
from tests.unit.operator.specimens import NAMESPACE, agent_body, connector_body


def _mcp(name: str, auth: dict[str, Any] | None) -> Connector:
    body = connector_body(name)
    body["spec"] = {"source": {"type": "mcp"}, "config": {"url": "https://mcp.example/mcp"}}
    if auth is not None:
        body["spec"]["config"]["auth"] = auth
    return Connector.from_body(body)


CONNECTORS = {
    "crm": _mcp("crm", {"type": "oauth", "grant": "authorization_code"}),
    "machine": _mcp("machine", {"type": "oauth"}),  # client_credentials: no person consents
    "plain": _mcp("plain", None),
    "petstore": Connector.from_body(connector_body("petstore")),
    "wiki": _mcp("wiki", {"type": "oauth", "grant": "authorization_code"}),
}


def test_only_the_agents_authorization_code_connectors_wait_for_consent() -> None:
    agent = Agent.from_body(agent_body(connectors=["wiki", "crm", "machine", "plain", "petstore", "gone"]))
    assert consent_connectors(agent, {**CONNECTORS, "gone": None}) == ["crm", "wiki"]
    other = Agent.from_body(agent_body(connectors=["machine", "petstore"]))
    assert consent_connectors(other, CONNECTORS) == []


def test_the_role_names_each_object_and_grants_no_read_of_a_secret() -> None:
    agent = Agent.from_body(agent_body(connectors=["crm", "wiki"]))
    role = consent_role(agent, ["crm", "wiki"])
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["metadata"]["ownerReferences"][0]["kind"] == "Agent"  # it goes with the Agent
    assert role["rules"] == [
        {"apiGroups": ["agentengine.io"], "resources": ["agents"], "verbs": ["get"],
         "resourceNames": [agent.meta.name]},
        {"apiGroups": ["agentengine.io"], "resources": ["connectors"], "verbs": ["get"],
         "resourceNames": ["crm", "wiki"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["update"],
         "resourceNames": ["mcp-oauth-crm", "mcp-oauth-wiki"]},
    ]  # fmt: skip
    # Empty resourceNames would grant every name: never rendered.
    with pytest.raises(ValueError, match="every name"):
        consent_role(agent, [])


def test_the_binding_is_to_the_oes_service_account_and_the_secret_is_empty() -> None:
    agent = Agent.from_body(agent_body(connectors=["crm"]))
    settings = RenderSettings(oe_namespace="platform", oe_service_account="rel-agent-engine-oe")
    binding = consent_binding(agent, settings)
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "rel-agent-engine-oe", "namespace": "platform"}
    ]
    assert binding["roleRef"]["name"] == consent_role(agent, ["crm"])["metadata"]["name"]
    secret = token_secret(NAMESPACE, "crm")
    assert secret["metadata"]["name"] == "mcp-oauth-crm" and "data" not in secret
    assert "ownerReferences" not in secret["metadata"]  # a person's consent outlives one Agent
