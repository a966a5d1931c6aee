"""What issue 43 asks of a rendered Agent: default resources on every component (never BestEffort), a
PodDisruptionBudget and a spread for components with several pods, requests above limits and sqlite Memory
with several pods refused, and no connector or model endpoint at a link-local or cloud metadata address
(with the Tool Pod's egress narrowed to IP-literal hosts, and those ranges excepted everywhere)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_operator.bundle import host_address, metadata_address_problem
from agent_operator.inputs import InputProblem, SecretMeta
from agent_operator.models import Connector, Resources
from agent_operator.quantities import quantity
from agent_operator.reconcile import Plan, plan_agent, summarize_connector
from agent_operator.render import component_resources
from agent_operator.settings import (
    DEFAULT_RESOURCES,
    OperatorSettings,
    RenderSettings,
    parse_default_resources,
)
from tests.conftest import REPO_ROOT
from tests.unit import test_chart_render as chart
from tests.unit.operator.specimens import agent_body, connector_body, inputs

SETTINGS = RenderSettings()
MEMORY_ON = {"enabled": True}


def _plan(agent: dict[str, Any] | None = None, *, settings: RenderSettings = SETTINGS, **kw: Any) -> Plan:
    return plan_agent(inputs(agent, **kw), settings=settings)


def _objects(plan: Plan, kind: str) -> dict[str, dict[str, Any]]:
    return {d.manifest["metadata"]["name"]: d.manifest for d in plan.objects if d.manifest["kind"] == kind}


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["spec"]["containers"][0]


def qos_class(container: dict[str, Any]) -> str:
    """The pod's QoS class as the kubelet computes it for one container (cpu and memory)."""
    resources = container.get("resources") or {}
    requests = {**resources.get("limits", {}), **resources.get("requests", {})}  # a limit defaults a request
    limits = resources.get("limits", {})
    if not requests and not limits:
        return "BestEffort"
    guaranteed = all(
        r in limits and r in requests and quantity(requests[r]) == quantity(limits[r])
        for r in ("cpu", "memory")
    )
    return "Guaranteed" if guaranteed else "Burstable"


# -- default resources ------------------------------------------------------------------------------------


def test_before_no_defaults_every_component_was_best_effort() -> None:
    """What the operator rendered before (no platform defaults): BestEffort pods, the first evicted."""
    plan = _plan(agent_body(components={"memory": MEMORY_ON}), settings=RenderSettings(default_resources={}))
    assert {n: qos_class(_container(d)) for n, d in _objects(plan, "Deployment").items()} == {
        "support-bot-aer": "BestEffort",
        "support-bot-tool": "BestEffort",
        "support-bot-memory": "BestEffort",
    }


def test_every_component_gets_cpu_and_memory_requests_and_limits_by_default() -> None:
    plan = _plan(agent_body(components={"memory": MEMORY_ON}))
    deployments = _objects(plan, "Deployment")
    assert len(deployments) == 3
    for name, deployment in deployments.items():
        component = name.removeprefix("support-bot-")
        resources = _container(deployment)["resources"]
        cpu, memory, cpu_limit, memory_limit = DEFAULT_RESOURCES[component]
        assert resources == {
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu_limit, "memory": memory_limit},
        }, name
        assert qos_class(_container(deployment)) == "Burstable"


def test_an_agent_overrides_the_defaults_and_they_never_contradict_it() -> None:
    defaults = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}
    # Named in full: kept as is (equal requests and limits make the pod Guaranteed).
    full = Resources(requests={"cpu": "2", "memory": "1Gi"}, limits={"cpu": "2", "memory": "1Gi"})
    assert component_resources(full, defaults) == full.model_dump()
    # A limit below the default request lowers the request to it; a request above the default limit raises
    # the limit to it; so the API server never sees a request above its limit.
    low = component_resources(Resources(limits={"memory": "64Mi", "cpu": "20m"}), defaults)
    assert low == {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"cpu": "20m", "memory": "64Mi"}}
    high = component_resources(Resources(requests={"memory": "2Gi"}), defaults)
    assert high == {"requests": {"memory": "2Gi", "cpu": "50m"}, "limits": {"cpu": "1", "memory": "2Gi"}}
    # Other resources pass through untouched.
    extra = component_resources(Resources(limits={"ephemeral-storage": "1Gi"}), defaults)
    assert extra["limits"]["ephemeral-storage"] == "1Gi" and extra["requests"]["cpu"] == "50m"


def test_a_guaranteed_agent_stays_guaranteed() -> None:
    same = {"cpu": "500m", "memory": "256Mi"}
    plan = _plan(agent_body(components={"aer": {"resources": {"requests": same, "limits": same}}}))
    assert qos_class(_container(_objects(plan, "Deployment")["support-bot-aer"])) == "Guaranteed"


def test_the_defaults_come_from_the_environment_the_chart_sets() -> None:
    given = {"tool": {"requests": {"memory": "256Mi"}, "limits": {"memory": "1Gi", "cpu": 2}}}
    settings = OperatorSettings.from_env({"AGENT_OPERATOR_DEFAULT_RESOURCES": json.dumps(given)})
    tool = settings.render.default_resources["tool"]
    assert tool == {"requests": {"cpu": "50m", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}
    assert settings.render.default_resources["aer"]["limits"]["memory"] == "512Mi"  # untouched: built-in


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("{not json", "is not JSON"),
        ('{"oe": {}}', "name components"),
        ('{"aer": {"requests": {"gpu": "1"}}}', "aer.requests takes cpu and memory only"),
        ('{"aer": {"limits": {"memory": "lots"}}}', "aer.limits.memory must be a quantity"),
        ('{"aer": {"requests": {"memory": "1Gi"}}}', "aer.requests.memory 1Gi is above its limit 512Mi"),
    ],
)
def test_bad_default_resources_stop_the_operator_naming_the_setting(value: str, names: str) -> None:
    with pytest.raises(ValueError, match="AGENT_OPERATOR_DEFAULT_RESOURCES") as caught:
        OperatorSettings.from_env({"AGENT_OPERATOR_DEFAULT_RESOURCES": value})
    assert names in str(caught.value)


# -- what the CRD refuses, for Agents stored before its rules -----------------------------------------------


@pytest.mark.parametrize("component", ["aer", "tool", "memory"])
def test_a_request_above_its_limit_is_one_condition_and_nothing_applied(component: str) -> None:
    resources = {"requests": {"memory": "1Gi"}, "limits": {"memory": "512Mi"}}
    spec = {component: {"resources": resources, **({"enabled": True} if component == "memory" else {})}}
    with pytest.raises(InputProblem) as caught:
        _plan(agent_body(components=spec))
    assert caught.value.reason == "ResourcesInvalid"
    assert f"spec.components.{component}.resources.requests.memory 1Gi" in caught.value.message


def test_sqlite_memory_with_several_pods_is_refused_mongodb_is_not() -> None:
    with pytest.raises(InputProblem) as caught:
        _plan(agent_body(components={"memory": {"enabled": True, "replicas": 2}}))
    assert caught.value.reason == "MemoryReplicasInvalid"
    assert "own file" in caught.value.message and "spec.components.memory.replicas" in caught.value.message
    mongodb = {"type": "mongodb", "uriSecretRef": {"name": "memory-db", "key": "uri"}}
    secrets = {
        **inputs().secrets,
        "memory-db": SecretMeta(resource_version="1", keys=frozenset({"uri"})),
    }
    plan = _plan(
        agent_body(components={"memory": {"enabled": True, "replicas": 2, "store": mongodb}}), secrets=secrets
    )
    assert _objects(plan, "Deployment")["support-bot-memory"]["spec"]["replicas"] == 2


# -- PodDisruptionBudgets and spread ------------------------------------------------------------------------


def test_components_with_several_pods_get_a_disruption_budget_of_one() -> None:
    single = _plan()
    assert _objects(single, "PodDisruptionBudget") == {}
    plan = _plan(agent_body(components={"aer": {"replicas": 3}, "tool": {"replicas": 2}}))
    budgets = _objects(plan, "PodDisruptionBudget")
    assert set(budgets) == {"support-bot-aer", "support-bot-tool"}
    for component in ("aer", "tool"):
        budget = budgets[f"support-bot-{component}"]
        assert budget["apiVersion"] == "policy/v1"
        assert budget["spec"] == {
            "maxUnavailable": 1,
            "selector": {
                "matchLabels": {"agentengine.io/agent": "support-bot", "agentengine.io/component": component}
            },
        }
        assert budget["metadata"]["ownerReferences"][0]["kind"] == "Agent"  # pruned with the Agent


def test_pods_spread_across_nodes_by_default_and_as_the_agent_says() -> None:
    def spread(plan: Plan, component: str) -> list[dict[str, Any]] | None:
        pod = _objects(plan, "Deployment")[f"support-bot-{component}"]["spec"]["template"]["spec"]
        return pod.get("topologySpreadConstraints")

    default = _plan()
    assert spread(default, "aer") == [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {
                "matchLabels": {"agentengine.io/agent": "support-bot", "agentengine.io/component": "aer"}
            },
        }
    ]
    # The same whatever the replicas: scaling never changes the pod template (no rollout).
    scaled = _plan(agent_body(components={"aer": {"replicas": 4}}))
    assert spread(scaled, "aer") == spread(default, "aer")
    zone = {"topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule", "maxSkew": 2}
    custom = _plan(
        agent_body(
            components={
                "tool": {"topologySpreadConstraints": [zone]},
                "aer": {"topologySpreadConstraints": []},
            }
        )
    )
    assert spread(custom, "aer") is None
    (rule,) = spread(custom, "tool") or []
    assert (
        rule["topologyKey"] == "topology.kubernetes.io/zone" and rule["whenUnsatisfiable"] == "DoNotSchedule"
    )
    assert rule["maxSkew"] == 2 and rule["labelSelector"]["matchLabels"]["agentengine.io/component"] == "tool"


# -- metadata addresses and egress --------------------------------------------------------------------------

FORBIDDEN = [
    "http://169.254.169.254/latest/meta-data",
    "http://169.254.170.2/v2/credentials",
    "https://169.254.0.1:8443",
    "http://[fe80::1]/",
    "http://[fd00:ec2::254]/latest",
    "http://[::ffff:169.254.169.254]/",
    "http://metadata.google.internal/computeMetadata/v1",
    "http://METADATA.GOOGLE.INTERNAL./",
    "http://2852039166/",  # 169.254.169.254 as one decimal number: resolvers accept it
    "http://0xa9.0xfe.0xa9.0xfe/",
    "http://0251.0376.0251.0376/",
    "http://169.254.43518/",
]


@pytest.mark.parametrize("base_url", FORBIDDEN)
def test_a_connector_at_a_metadata_address_is_refused_naming_the_field(base_url: str) -> None:
    body = connector_body(source={"type": "openapi", "baseUrl": base_url})
    agent_inputs = inputs(connectors=[body])
    with pytest.raises(InputProblem) as caught:
        plan_agent(agent_inputs, settings=SETTINGS)
    assert caught.value.reason == "BaseUrlForbidden" and caught.value.condition == "BundleReady"
    assert (
        "spec.source.baseUrl" in caught.value.message
        and "agents.allowMetadataAddresses" in caught.value.message
    )
    # The Connector's own condition says it too.
    with pytest.raises(InputProblem) as on_connector:
        summarize_connector(Connector.from_body(body), agent_inputs.config_maps)
    assert on_connector.value.reason == "BaseUrlForbidden"


def test_the_platform_may_allow_metadata_addresses() -> None:
    body = connector_body(source={"type": "openapi", "baseUrl": "http://169.254.169.254/"})
    allowed = RenderSettings(allow_metadata_addresses=True)
    plan = plan_agent(inputs(connectors=[body]), settings=allowed)
    tool = _tool_egress(plan)
    assert {"ipBlock": {"cidr": "169.254.169.254/32"}} in tool[0]["to"]
    assert summarize_connector(
        Connector.from_body(body), inputs(connectors=[body]).config_maps, allow_metadata_addresses=True
    )
    settings = OperatorSettings.from_env({"AGENT_OPERATOR_ALLOW_METADATA_ADDRESSES": "true"})
    assert settings.render.allow_metadata_addresses is True
    with pytest.raises(ValueError, match="AGENT_OPERATOR_ALLOW_METADATA_ADDRESSES"):
        OperatorSettings.from_env({"AGENT_OPERATOR_ALLOW_METADATA_ADDRESSES": "sometimes"})


@pytest.mark.parametrize(
    "host", ["169.255.0.1", "10.0.0.5", "api.example.com", "fd00::1", "metadata-service"]
)
def test_ordinary_addresses_are_not_metadata_addresses(host: str) -> None:
    assert metadata_address_problem(host) is None


def test_a_builtin_connector_host_and_the_model_endpoint_are_checked_too() -> None:
    http = connector_body("meta", source={"type": "http"}, config={"base_url": "http://169.254.169.254"})
    for key in ("catalog", "expose", "auth"):
        http["spec"].pop(key, None)
    with pytest.raises(InputProblem) as caught:
        plan_agent(
            inputs(agent_body(connectors=["meta"]), connectors=[http], config_maps={}), settings=SETTINGS
        )
    assert (
        caught.value.reason == "BaseUrlForbidden"
        and "spec.config host '169.254.169.254'" in caught.value.message
    )
    llm = agent_body()
    llm["spec"]["llm"]["baseUrl"] = "http://[fd00:ec2::254]/v1"
    with pytest.raises(InputProblem) as on_llm:
        _plan(llm)
    assert on_llm.value.reason == "LlmBaseUrlForbidden" and "spec.llm.baseUrl" in on_llm.value.message


def _tool_egress(plan: Plan) -> list[dict[str, Any]]:
    (policy,) = (
        d.manifest
        for d in plan.objects
        if d.manifest["kind"] == "NetworkPolicy"
        and d.manifest["metadata"]["name"].startswith("agent-engine-tool-")
    )
    return policy["spec"]["egress"]


def test_egress_goes_to_ip_literal_hosts_alone_and_to_dns_names_by_port() -> None:
    none = {"type": "none"}
    by_ip = connector_body(
        "inventory", source={"type": "openapi", "baseUrl": "http://10.20.30.40:9000/api"}, auth=none
    )
    by_ip6 = connector_body(
        "billing", source={"type": "openapi", "baseUrl": "https://[2001:db8::7]/"}, auth=none
    )
    by_name = connector_body()  # https://petstore.example.com/v1
    config_maps = {
        f"{n}-openapi": inputs().config_maps["petstore-openapi"] for n in ("inventory", "billing", "petstore")
    }
    plan = _plan(
        agent_body(connectors=["inventory", "billing", "petstore"]),
        connectors=[by_ip, by_ip6, by_name],
        config_maps=config_maps,
    )
    egress = _tool_egress(plan)
    assert {
        "to": [{"ipBlock": {"cidr": "10.20.30.40/32"}}],
        "ports": [{"protocol": "TCP", "port": 9000}],
    } in egress
    # 443 also serves a DNS name, which a NetworkPolicy cannot name: that port goes anywhere (but metadata).
    anywhere = [r for r in egress if {"protocol": "TCP", "port": 443} in r.get("ports", [])]
    assert anywhere and all(r["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0" for r in anywhere)
    assert not any(
        b["ipBlock"]["cidr"] == "0.0.0.0/0"
        for r in egress
        if {"protocol": "TCP", "port": 9000} in r["ports"]
        for b in r.get("to", [])
    )


def test_every_egress_to_anywhere_excepts_the_metadata_ranges() -> None:
    mongodb = {"type": "mongodb", "uriSecretRef": {"name": "memory-db", "key": "uri"}}
    secrets = {**inputs().secrets, "memory-db": SecretMeta(resource_version="1", keys=frozenset({"uri"}))}
    plan = _plan(agent_body(components={"memory": {"enabled": True, "store": mongodb}}), secrets=secrets)
    blocks = [
        block["ipBlock"]
        for policy in _objects(plan, "NetworkPolicy").values()
        for rule in policy["spec"].get("egress", [])
        for block in rule.get("to", [])
        if "ipBlock" in block
    ]
    wide = [b for b in blocks if b["cidr"] in ("0.0.0.0/0", "::/0")]
    assert len(wide) >= 4  # the Tool Pod's providers and model, Memory's store
    for block in wide:
        expected = ["169.254.0.0/16"] if block["cidr"] == "0.0.0.0/0" else ["fe80::/10", "fd00:ec2::254/128"]
        assert block["except"] == expected


def test_host_address_reads_what_a_resolver_reads() -> None:
    assert str(host_address("2852039166")) == "169.254.169.254"
    assert str(host_address("127.1")) == "127.0.0.1"
    assert host_address("api.example.com") is None and host_address("08.1.2.3") is None
    assert host_address("256.1.1.1") is None


def test_the_charts_values_are_the_operators_defaults() -> None:
    """The chart sets AGENT_OPERATOR_DEFAULT_RESOURCES from agents.resources (toJson): the same numbers."""
    values = yaml.safe_load((REPO_ROOT / "charts" / "agent-engine" / "values.yaml").read_text())
    parsed = parse_default_resources(json.dumps(values["agents"]["resources"]))
    assert parsed == RenderSettings().default_resources
    assert values["agents"]["allowMetadataAddresses"] is False


def test_the_operator_itself_never_asks_an_mcp_server_at_a_metadata_address() -> None:
    """The operator's discovery request would come from its own pod: refused before the token is read
    (api=None: any Secret read or request would fail this test)."""
    from agent_operator.discovery import DiscoverySettings, McpDiscovery

    body = connector_body("crm")
    body["spec"] = {
        "source": {"type": "mcp"},
        "config": {"url": "http://169.254.169.254/mcp"},
        "credentials": [{"field": "token", "env": "CRM_TOKEN", "secretKeyRef": {"name": "crm", "key": "t"}}],
    }
    discovery = McpDiscovery(api=None)  # type: ignore[arg-type]
    outcome = asyncio.run(discovery.refresh(("team-a", "crm"), body))
    assert outcome is not None and outcome.condition.reason == "BaseUrlForbidden"
    assert "spec.config.url" in outcome.condition.message
    allowed = DiscoverySettings.from_env({"AGENT_OPERATOR_ALLOW_METADATA_ADDRESSES": "true"})
    assert allowed.allow_metadata_addresses and not DiscoverySettings.from_env({}).allow_metadata_addresses


@pytest.fixture
def helm() -> Path:
    path = chart.cache_root() / f"k8s-{chart.pinned_versions()['K8S_VERSION']}" / "bin" / "helm"
    if not path.exists():
        pytest.skip(f"no helm at {path}: run `make cluster-bins`")
    return path


def test_the_chart_hands_its_agent_values_to_the_operator(helm: Path, tmp_path: Path) -> None:
    """helm template, then the operator's own settings parser on the operator Deployment's env (the OE's
    public key read from the chart's ConfigMap, written where a pod would have it mounted)."""
    values = {"agents__resources__tool__limits__memory": "2Gi", "agents__allowMetadataAddresses": "true"}
    docs = chart.render(helm, **values)
    (operator,) = (
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-operator")
    )
    container = operator["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", "") for e in container["env"]}
    (public_key,) = (
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-oe-public-key")
    )
    key_file = tmp_path / Path(env["AGENT_OPERATOR_OE_PUBLIC_KEY_FILE"]).name
    key_file.write_text(next(iter(public_key["data"].values())), encoding="utf-8")
    env["AGENT_OPERATOR_OE_PUBLIC_KEY_FILE"] = str(key_file)
    settings = OperatorSettings.from_env(env).render
    assert settings.oe_public_key.startswith("-----BEGIN PUBLIC KEY-----")
    assert settings.default_resources["tool"]["limits"] == {"cpu": "1", "memory": "2Gi"}
    assert settings.default_resources["aer"] == RenderSettings().default_resources["aer"]
    assert settings.allow_metadata_addresses is True
    assert "agents/resources/aer/requests" in chart.refused(helm, {"agents.resources.aer.requests.gpu": "1"})
