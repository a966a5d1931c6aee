"""Connectors of a built-in type: `source.type` and `spec.config` checked against the type's schema, their
credentials routed to the Tool Pod only, their tools in the bundle, their ports in the NetworkPolicy."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from agent_operator.bundle import BUNDLE, materialize
from agent_operator.inputs import InputProblem, SecretMeta, agent_references
from agent_operator.models import Connector
from agent_operator.reconcile import plan_agent, summarize_connector
from agent_operator.settings import RenderSettings
from agent_runtime.connectors.builtin.registry import registry
from tests.conftest import REPO_ROOT
from tests.unit.operator.specimens import NAMESPACE, agent_body, connector_body, inputs

POSTGRES = {
    "source": {"type": "postgres"},
    "config": {"host": "db.team-a.svc", "port": 5432, "database": "shop", "user": "agent"},
    "credentials": [
        {
            "field": "password",
            "env": "SHOP_DB_PASSWORD",
            "secretKeyRef": {"name": "shop-db", "key": "password"},
        }
    ],
}
SLACK = {
    "source": {"type": "slack"},
    "config": {},
    "expose": {"allow": ["post_message"]},
    "credentials": [
        {"field": "token", "env": "SLACK_TOKEN", "secretKeyRef": {"name": "slack", "key": "token"}}
    ],
}


def builtin_body(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    body = connector_body(name)
    body["spec"] = json.loads(json.dumps(spec))
    return body


def connector(name: str, spec: dict[str, Any]) -> Connector:
    return Connector.from_body(builtin_body(name, spec))


def test_the_crd_lists_openapi_and_every_registered_type() -> None:
    crd = yaml.safe_load((REPO_ROOT / "crds" / "agentengine.io_connectors.yaml").read_text())
    source = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "source"
    ]
    assert sorted(source["properties"]["type"]["enum"]) == sorted(["openapi", *registry()])


def test_a_builtin_connector_materializes_from_its_config() -> None:
    defs = materialize(connector("shop-db", POSTGRES), {})
    assert (defs.type, [t.name for t in defs.tools]) == ("postgres", ["postgres.query", "postgres.execute"])
    assert defs.credentials == {"password": "SHOP_DB_PASSWORD"} and defs.config["port"] == 5432
    summary = summarize_connector(connector("shop-db", POSTGRES), {})
    assert summary.tool_count == 2


@pytest.mark.parametrize(
    ("change", "reason", "field"),
    [
        (
            {"config": {"host": "db", "port": "5432", "database": "shop", "user": "a"}},
            "ConfigInvalid",
            "spec.config.port",
        ),
        ({"config": {"host": "db", "database": "shop"}}, "ConfigInvalid", "spec.config.user"),
        ({"config": {**POSTGRES["config"], "sslmode": "x"}}, "ConfigInvalid", "spec.config.sslmode"),
        (
            {"source": {"type": "slack"}, "config": {}, "credentials": []},
            "ConfigInvalid",
            "spec.credentials.token",
        ),
        ({"source": {"type": "oracle"}}, "ConnectorTypeUnknown", "spec.source.type"),
        ({"expose": {"allow": ["drop_everything"]}}, "ConfigInvalid", "spec.expose.allow"),
    ],
)
def test_a_bad_config_is_a_condition_naming_the_field(
    change: dict[str, Any], reason: str, field: str
) -> None:
    with pytest.raises(InputProblem) as caught:
        materialize(connector("shop-db", {**POSTGRES, **change}), {})
    assert (caught.value.reason, caught.value.condition) == (reason, BUNDLE)
    assert caught.value.message.startswith(f"Connector shop-db: {field}")


def test_a_platform_env_name_is_refused() -> None:
    spec = {**POSTGRES, "credentials": [{**POSTGRES["credentials"][0], "env": "AGENTIC_PASSWORD"}]}
    with pytest.raises(InputProblem) as caught:
        materialize(connector("shop-db", spec), {})
    assert caught.value.reason == "AuthEnvReserved" and "spec.credentials[0].env" in caught.value.message


def _agent_inputs(*bodies: dict[str, Any], secrets: dict[str, SecretMeta] | None = None) -> Any:
    names = [b["metadata"]["name"] for b in bodies]
    return inputs(
        agent_body(connectors=names),
        connectors=list(bodies),
        config_maps={},
        secrets=secrets
        or {
            "llm-keys": SecretMeta(resource_version="1", keys=frozenset({"openai"})),
            "shop-db": SecretMeta(resource_version="2", keys=frozenset({"password"})),
            "slack": SecretMeta(resource_version="3", keys=frozenset({"token"})),
        },
    )


def test_plan_puts_builtin_tools_in_the_bundle_and_credentials_in_the_tool_pod_only() -> None:
    agent_inputs = _agent_inputs(builtin_body("shop-db", POSTGRES), builtin_body("team-slack", SLACK))
    plan = plan_agent(agent_inputs, settings=RenderSettings())
    assert plan.bundle.tool_count == 3
    files = {k: v for part in plan.bundle.parts for k, v in part.data.items()}
    index = json.loads(files["index.yaml"])
    assert {e["name"]: e.get("type") for e in index["connectors"]} == {
        "shop-db": "postgres",
        "team-slack": "slack",
    }
    assert (
        "SHOP_DB_PASSWORD" in files["shop-db.yaml"]
        and "password" not in json.loads(files["shop-db.yaml"])["config"]
    )
    deployments = {
        d.manifest["metadata"]["name"]: d.manifest for d in plan.objects if d.manifest["kind"] == "Deployment"
    }
    for name, deployment in deployments.items():
        env = {e["name"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert ("SHOP_DB_PASSWORD" in env and "SLACK_TOKEN" in env) == name.endswith("-tool"), name
    policies = [d.manifest for d in plan.objects if d.manifest["kind"] == "NetworkPolicy"]
    ports = {
        p["port"]
        for policy in policies
        for rule in policy["spec"].get("egress", [])
        for p in rule.get("ports", [])
    }
    assert {5432, 443} <= ports
    refs = agent_references(agent_inputs.agent, agent_inputs.connectors)
    assert refs.secrets >= {"shop-db", "slack"} and refs.config_maps == frozenset()


def test_two_connectors_offering_one_tool_name_are_refused() -> None:
    other = {
        **POSTGRES,
        "config": {**POSTGRES["config"], "database": "other"},
        "credentials": [{**POSTGRES["credentials"][0], "env": "OTHER_DB_PASSWORD"}],
    }
    agent_inputs = _agent_inputs(builtin_body("shop-db", POSTGRES), builtin_body("other-db", other))
    with pytest.raises(InputProblem) as caught:
        plan_agent(agent_inputs, settings=RenderSettings())
    assert caught.value.reason == "ToolNameConflict" and "postgres.query" in caught.value.message


def test_a_missing_credential_secret_is_reported() -> None:
    agent_inputs = _agent_inputs(
        builtin_body("shop-db", POSTGRES),
        secrets={"llm-keys": SecretMeta(resource_version="1", keys=frozenset({"openai"}))},
    )
    with pytest.raises(InputProblem) as caught:
        plan_agent(agent_inputs, settings=RenderSettings())
    assert caught.value.reason == "SecretMissing" and "SHOP_DB_PASSWORD" in caught.value.message
    assert NAMESPACE in caught.value.message


def test_the_orders_example_manifest_materializes() -> None:
    documents = list(
        yaml.safe_load_all((REPO_ROOT / "examples" / "kubernetes" / "orders-agent.yaml").read_text())
    )
    connectors = [Connector.from_body(d) for d in documents if d["kind"] == "Connector"]
    kinds = {c.meta.name: materialize(c, {}).type for c in connectors}
    assert kinds == {"shop-db": "postgres", "team-slack": "slack", "order-events": "webhook"}
    agent = next(d for d in documents if d["kind"] == "Agent")
    assert agent["spec"]["connectors"] == list(kinds)


def test_the_orders_example_agent_yaml_builds_its_bundle() -> None:
    from agent_runtime.connectors import bundle_from_agent_config

    bundle = bundle_from_agent_config(REPO_ROOT / "examples" / "orders-agent" / "agent.yaml")
    tools = {t.name: t.sensitive for b in bundle.builtins for t in b.tools}
    assert tools == {
        "postgres.query": False,
        "slack.post_message": True,
        "slack.list_channels": False,
        "webhook.send": True,
    }
