"""A Connector of type `mcp` in the operator: the bundle from its recorded discovery, and when to discover."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_operator.bundle import BUNDLE, egress_endpoints, materialize
from agent_operator.discovery import DiscoverySettings, McpDiscovery
from agent_operator.inputs import InputProblem, SecretMeta, agent_references
from agent_operator.models import Connector
from agent_operator.reconcile import plan_agent
from agent_operator.settings import RenderSettings
from agent_runtime.connectors.mcp.catalog import DiscoveredTool, catalog_digest
from tests.unit.operator.specimens import NAMESPACE, agent_body, connector_body, inputs

UID = "3f2a9c1e-77aa-4b1d-9e0f-0123456789ab"
SPEC = {
    "source": {"type": "mcp"},
    "config": {"url": "http://mcp.tools.svc:8000/mcp"},
    "credentials": [
        {"field": "token", "env": "CRM_MCP_TOKEN", "secretKeyRef": {"name": "crm", "key": "token"}}
    ],
}
TOOLS = [
    DiscoveredTool(name="lookup", readOnly=True),
    DiscoveredTool(
        name="delete_item", inputSchema={"type": "object", "properties": {"id": {"type": "string"}}}
    ),
]


def mcp_body(*, status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body = connector_body("crm")
    body["spec"] = json.loads(json.dumps({**SPEC, **spec}))
    body["metadata"]["uid"] = UID
    body["status"] = status or {}
    return body


def discovered(tools: list[DiscoveredTool] = TOOLS) -> dict[str, Any]:
    catalog = [t.model_dump(mode="json", by_alias=True) for t in tools]
    return {"discovery": {"toolCount": len(tools), "digest": catalog_digest(tools), "catalog": catalog}}


def test_the_bundle_file_comes_from_the_recorded_discovery() -> None:
    defs = materialize(Connector.from_body(mcp_body(status=discovered())), {})
    assert [(t.name, t.sensitive) for t in defs.tools] == [
        ("mcp.3f2a9c1e.lookup", False),
        ("mcp.3f2a9c1e.delete_item", True),
    ]
    assert defs.credentials == {"token": "CRM_MCP_TOKEN"} and defs.config["server_id"] == "3f2a9c1e"


def test_an_undiscovered_connector_is_not_ready_and_says_why() -> None:
    status = {"conditions": [{"type": "Discovered", "status": "False", "message": "connection: refused"}]}
    with pytest.raises(InputProblem) as caught:
        materialize(Connector.from_body(mcp_body(status=status)), {})
    assert caught.value.reason == "ToolsNotDiscovered" and caught.value.condition == BUNDLE
    assert "connection: refused" in caught.value.message


def test_expose_allow_selects_from_the_recorded_tools() -> None:
    defs = materialize(Connector.from_body(mcp_body(status=discovered(), expose={"allow": ["lookup"]})), {})
    assert [t.name for t in defs.tools] == ["mcp.3f2a9c1e.lookup"]
    with pytest.raises(InputProblem) as caught:
        materialize(Connector.from_body(mcp_body(status=discovered(), expose={"allow": ["gone"]})), {})
    assert caught.value.reason == "ExposeAllowUnknown" and "spec.expose.allow" in caught.value.message


def test_an_agent_gets_the_tools_its_token_in_the_tool_pod_and_egress_to_the_server() -> None:
    body = mcp_body(status=discovered())
    connector = Connector.from_body(body)
    agent = agent_body(connectors=["crm"])
    secrets = {
        "crm": SecretMeta("1", frozenset({"token"})),
        "llm-keys": SecretMeta("1", frozenset({"openai"})),
    }
    planned = plan_agent(inputs(agent, connectors=[body], secrets=secrets), settings=RenderSettings())
    assert planned.bundle.tool_count == 2
    tool_pod = next(d.manifest for d in planned.objects if d.manifest["metadata"]["name"].endswith("-tool")
                    and d.manifest["kind"] == "Deployment")  # fmt: skip
    env = {e["name"] for e in tool_pod["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "CRM_MCP_TOKEN" in env
    aer = next(d.manifest for d in planned.objects if d.manifest["metadata"]["name"].endswith("-aer")
               and d.manifest["kind"] == "Deployment")  # fmt: skip
    assert "CRM_MCP_TOKEN" not in json.dumps(aer)
    policy = next(d.manifest for d in planned.objects if d.manifest["kind"] == "NetworkPolicy"
                  and d.manifest["metadata"]["labels"].get("agentengine.io/component") == "tool")  # fmt: skip
    assert 8000 in [p.get("port") for rule in policy["spec"]["egress"] for p in rule.get("ports", [])]
    assert "crm" in agent_references(agent_from(agent), {"crm": connector}).secrets


def agent_from(body: dict[str, Any]) -> Any:
    from agent_operator.models import Agent

    return Agent.from_body(body)


def test_discovery_is_due_when_new_on_spec_change_on_the_annotation_and_on_the_period() -> None:
    discovery = McpDiscovery(api=None, settings=DiscoverySettings(period_seconds=600, retry_seconds=30))  # type: ignore[arg-type]
    key = (NAMESPACE, "crm")
    body = mcp_body()
    assert discovery.due(key, body, now=0)
    from agent_operator.discovery import _Attempt
    from agent_operator.status import Condition

    ok = Condition("Discovered", "True", "Discovered", "")
    discovery.attempts[key] = _Attempt(discovery.fingerprint(body), at=0, ok=True, condition=ok, record=None)
    assert not discovery.due(key, body, now=599)
    assert discovery.due(key, body, now=600)
    changed = json.loads(json.dumps(body))
    changed["metadata"]["generation"] = 2
    assert discovery.due(key, changed, now=1)
    annotated = json.loads(json.dumps(body))
    annotated["metadata"]["annotations"] = {"agentengine.io/rediscover": "now"}
    assert discovery.due(key, annotated, now=1)
    discovery.attempts[key] = _Attempt(discovery.fingerprint(body), at=0, ok=False, condition=ok, record=None)
    assert not discovery.due(key, body, now=29) and discovery.due(key, body, now=30)
    other = connector_body("petstore")
    assert not discovery.due((NAMESPACE, "petstore"), other, now=0)


def test_the_watch_notices_new_tools_and_the_annotation_but_not_the_first_sight() -> None:
    discovery = McpDiscovery(api=None)  # type: ignore[arg-type]
    key = (NAMESPACE, "crm")
    assert not discovery.noticed(key, mcp_body(status=discovered()))
    assert not discovery.noticed(key, mcp_body(status=discovered()))
    assert discovery.noticed(key, mcp_body(status=discovered(TOOLS[:1])))
    annotated = mcp_body(status=discovered(TOOLS[:1]))
    annotated["metadata"]["annotations"] = {"agentengine.io/rediscover": "1"}
    assert discovery.noticed(key, annotated)


def test_settings_name_the_variable_when_wrong() -> None:
    assert DiscoverySettings.from_env({"AGENT_OPERATOR_MCP_DISCOVERY_SECONDS": "0"}).period_seconds == 0
    with pytest.raises(ValueError, match="AGENT_OPERATOR_MCP_RETRY_SECONDS"):
        DiscoverySettings.from_env({"AGENT_OPERATOR_MCP_RETRY_SECONDS": "soon"})


def _deployments(planned: Any) -> dict[str, dict[str, Any]]:
    return {
        d.manifest["metadata"]["name"].rsplit("-", 1)[-1]: d.manifest
        for d in planned.objects
        if d.manifest["kind"] == "Deployment"
    }


def test_an_oauth_connector_gives_only_the_tool_pod_a_token_dir_and_its_login_secret() -> None:
    auth = {
        "type": "oauth",
        "grant": "authorization_code",
        "authorization_server": "https://auth.example.com",
    }
    body = mcp_body(
        status=discovered(),
        config={"url": "http://mcp.tools.svc:8000/mcp", "auth": auth},
        credentials=[
            {"field": "client_id", "env": "CRM_CLIENT_ID", "secretKeyRef": {"name": "crm", "key": "id"}}
        ],
    )
    agent = agent_body(connectors=["crm"])
    secrets = {"crm": SecretMeta("1", frozenset({"id"})), "llm-keys": SecretMeta("1", frozenset({"openai"}))}
    planned = plan_agent(inputs(agent, connectors=[body], secrets=secrets), settings=RenderSettings())
    pods = _deployments(planned)
    tool = pods["tool"]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in tool["containers"][0]["env"]}
    assert env["AGENTIC_MCP_OAUTH_DIR"] == "/tmp/mcp-oauth"  # writable: the root filesystem is read-only
    assert env["AGENTIC_MCP_OAUTH_SEED_DIR"] == "/etc/agent-engine/mcp-oauth-seed"
    seed = next(v for v in tool["volumes"] if v["name"] == "mcp-oauth-seed")
    assert seed["projected"]["sources"] == [
        {
            "secret": {
                "name": "mcp-oauth-crm",
                "optional": True,
                "items": [{"key": "crm.json", "path": "crm.json"}],
            }
        }
    ]
    assert {"name": "mcp-oauth-seed", "mountPath": "/etc/agent-engine/mcp-oauth-seed", "readOnly": True} in (
        tool["containers"][0]["volumeMounts"]
    )
    for other in ("aer", "memory"):
        if other in pods:
            assert "mcp-oauth" not in json.dumps(pods[other])
    # The pinned authorization server is the Tool Pod's to reach, beside the MCP server.
    defs = materialize(Connector.from_body(body), {})
    assert ("auth.example.com", 443) in egress_endpoints([defs])
    assert ("mcp.tools.svc", 8000) in egress_endpoints([defs])


def test_without_an_oauth_connector_the_tool_pod_gets_no_token_dir() -> None:
    body = mcp_body(status=discovered())
    secrets = {
        "crm": SecretMeta("1", frozenset({"token"})),
        "llm-keys": SecretMeta("1", frozenset({"openai"})),
    }
    planned = plan_agent(
        inputs(agent_body(connectors=["crm"]), connectors=[body], secrets=secrets), settings=RenderSettings()
    )
    assert "mcp-oauth" not in json.dumps(_deployments(planned)["tool"])
