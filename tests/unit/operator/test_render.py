"""Rendering an Agent: golden files plus the invariants the trust table and the runtime contract demand."""

from __future__ import annotations

from typing import Any

import pytest

from agent_operator.inputs import SecretMeta
from agent_operator.reconcile import Plan, plan_agent
from agent_operator.render import APPLIED_HASH, BUNDLE_DIGEST, SECRETS_CHECKSUM
from agent_operator.settings import RenderSettings
from agent_runtime import contract
from tests.unit.operator.golden import assert_golden
from tests.unit.operator.specimens import agent_body, connector_body, inputs, petstore_text

SETTINGS = RenderSettings()


def _plan(**kwargs: Any) -> Plan:
    return plan_agent(inputs(**kwargs), settings=SETTINGS)


def _by_kind(plan: Plan, kind: str) -> dict[str, dict[str, Any]]:
    return {d.manifest["metadata"]["name"]: d.manifest for d in plan.objects if d.manifest["kind"] == kind}


def _policy(plan: Plan, component: str) -> dict[str, Any]:
    """The NetworkPolicy that selects `component`'s pods (shared ones are named by digest)."""
    (policy,) = (
        d.manifest
        for d in plan.objects
        if d.manifest["kind"] == "NetworkPolicy"
        and d.manifest["spec"]["podSelector"].get("matchLabels", {}).get("agentengine.io/component")
        == component
    )
    return policy


def _env(deployment: dict[str, Any]) -> dict[str, Any]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def _memory_agent() -> dict[str, Any]:
    return agent_body(
        connectors=["petstore", "weather"],
        components={
            "aer": {"replicas": 2, "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}},
            "tool": {"env": [{"name": "HTTP_TIMEOUT", "value": "20"}]},
            "memory": {
                "enabled": True,
                # An HTTP embeddings provider (X-08): the Memory server's egress reaches its port.
                "env": [
                    {"name": "MEMORY_EMBEDDINGS_PROVIDER", "value": "http"},
                    {"name": "MEMORY_EMBEDDINGS_URL", "value": "https://embeddings.example.test:8443/v1"},
                ],
                "store": {
                    "type": "mongodb",
                    "database": "agents",
                    "uriSecretRef": {"name": "memory-db", "key": "uri"},
                },
            },
        },
    )


def _memory_inputs_kwargs() -> dict[str, Any]:
    weather = connector_body(
        "weather",
        source={"type": "openapi", "baseUrl": "http://weather.internal:8080/api"},
        expose={"allow": ["*"]},
        auth={"type": "none"},
    )
    return {
        "agent": _memory_agent(),
        "connectors": [connector_body(), weather],
        "config_maps": {
            "petstore-openapi": {"openapi.json": petstore_text()},
            "weather-openapi": {"openapi.json": petstore_text(title="Weather")},
        },
    }


def test_golden_basic_agent() -> None:
    assert_golden("basic_agent", [d.manifest for d in _plan().objects])


def test_golden_agent_with_mongodb_memory_and_two_connectors() -> None:
    assert_golden("memory_agent", [d.manifest for d in _plan(**_memory_inputs_kwargs()).objects])


def _memory_egress(memory_env: list[dict[str, str]]) -> list[dict[str, Any]]:
    agent = agent_body(components={"memory": {"enabled": True, "env": memory_env}})
    policies = [d.manifest for d in _plan(agent=agent).objects if d.manifest["kind"] == "NetworkPolicy"]
    memory = next(p for p in policies if p["metadata"]["name"].endswith("-memory"))
    return memory["spec"]["egress"]


def test_memory_egress_reaches_its_http_embeddings_provider_only_when_configured() -> None:
    dns_only = _memory_egress([])
    assert all(rule["ports"][0]["port"] == 53 for rule in dns_only)
    by_address = _memory_egress(
        [
            {"name": "MEMORY_EMBEDDINGS_PROVIDER", "value": "http"},
            {"name": "MEMORY_EMBEDDINGS_URL", "value": "http://10.1.2.3:9000/v1"},
        ]
    )
    assert {"to": [{"ipBlock": {"cidr": "10.1.2.3/32"}}], "ports": [{"protocol": "TCP", "port": 9000}]} in (
        by_address
    )
    by_name = _memory_egress(
        [
            {"name": "MEMORY_EMBEDDINGS_PROVIDER", "value": "voyage"},
            {"name": "MEMORY_EMBEDDINGS_URL", "value": "https://api.voyageai.com/v1"},
        ]
    )
    assert any(rule["ports"] == [{"protocol": "TCP", "port": 443}] for rule in by_name)
    local = _memory_egress([{"name": "MEMORY_EMBEDDINGS_URL", "value": "https://api.voyageai.com/v1"}])
    assert local == dns_only  # the local model: no egress, whatever URL is left over


def test_same_inputs_render_identical_objects() -> None:
    assert [d.manifest for d in _plan().objects] == [d.manifest for d in _plan().objects]


def test_secrets_reach_only_the_component_the_trust_table_names() -> None:
    deployments = _by_kind(_plan(**_memory_inputs_kwargs()), "Deployment")
    aer, tool, memory = (_env(deployments[f"support-bot-{c}"]) for c in ("aer", "tool", "memory"))
    # Decision 9: model calls run in the Tool Pod, so the LLM key goes there and never to the AER.
    assert "OPENAI_API_KEY" in tool and "OPENAI_API_KEY" not in aer and "OPENAI_API_KEY" not in memory
    assert "PETSTORE_TOKEN" in tool and "PETSTORE_TOKEN" not in aer and "PETSTORE_TOKEN" not in memory
    assert (
        "MEMORY_MONGODB_URI" in memory
        and "MEMORY_MONGODB_URI" not in aer
        and "MEMORY_MONGODB_URI" not in tool
    )
    assert tool["PETSTORE_TOKEN"] == {"secretKeyRef": {"name": "petstore-creds", "key": "token"}}


def test_pods_follow_the_runtime_contract_and_restricted_security() -> None:
    plan = _plan(**_memory_inputs_kwargs())
    for name, deployment in _by_kind(plan, "Deployment").items():
        component = name.rsplit("-", 1)[1]
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert container["command"] == list(contract.IMAGE_COMMAND)
        env = _env(deployment)
        assert env[contract.RUNNER_MODE_ENV] == component
        assert env[contract.TOKEN_FILE_ENV] == contract.TOKEN_FILE_PATH
        assert env[contract.APP_ID_ENV] == "team-a.support-bot"
        assert (env.get(contract.REQUIRE_PROJECT_SCOPED_DB_ENV) == "true") == (component == "aer")
        assert container["ports"][0]["containerPort"] == contract.PORTS[contract.RunnerMode(component)]
        assert container["readinessProbe"]["httpGet"]["path"] == contract.READY_PATH
        assert container["livenessProbe"]["httpGet"]["path"] == contract.HEALTH_PATH
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert contract.TMP_DIR in mounts
        assert mounts[contract.TOKEN_MOUNT_DIR]["readOnly"] is True
        if component in ("aer", "tool"):
            assert env[contract.BUNDLE_PATH_ENV] == contract.BUNDLE_INDEX_PATH
            assert mounts[contract.BUNDLE_MOUNT_DIR]["readOnly"] is True
        else:
            assert contract.BUNDLE_MOUNT_DIR not in mounts
    for sa in _by_kind(plan, "ServiceAccount").values():
        assert sa["automountServiceAccountToken"] is False


def test_own_children_are_owned_by_the_agent_shared_ones_by_nobody_and_all_hash_stamped() -> None:
    plan = _plan(**_memory_inputs_kwargs())
    own = set()
    for desired in plan.objects:
        meta = desired.manifest["metadata"]
        assert desired.create_only or APPLIED_HASH in meta["annotations"]
        if desired.shared:
            # Used by every Agent rendering it alike: the operator collects it, not the garbage collector.
            assert "ownerReferences" not in meta and "agentengine.io/agent" not in meta["labels"]
            assert meta["labels"]["agentengine.io/shared"] == "true"
            continue
        assert meta["ownerReferences"][0]["uid"] == "uid-support-bot"
        assert meta["ownerReferences"][0]["controller"] is True
        own.add((desired.manifest["kind"], meta["name"]))
    assert own == {
        ("Secret", "support-bot-runtime-token"),
        *(
            (kind, f"support-bot-{c}")
            for kind in ("Deployment", "Service")
            for c in ("aer", "tool", "memory")
        ),
        ("NetworkPolicy", "support-bot-memory"),  # who may reach this Agent's Memory: its own pods only
        ("PodDisruptionBudget", "support-bot-aer"),  # its AER runs 2 replicas
    }


def test_agents_rendered_alike_share_everything_but_their_own_children() -> None:
    first = plan_agent(inputs(agent=agent_body(name="bot-a")), settings=SETTINGS)
    second = plan_agent(inputs(agent=agent_body(name="bot-b")), settings=SETTINGS)
    shared_a = [d.manifest for d in first.objects if d.shared]
    shared_b = [d.manifest for d in second.objects if d.shared]
    assert shared_a == shared_b
    assert sorted(m["kind"] for m in shared_a) == [
        "ConfigMap", "NetworkPolicy", "NetworkPolicy", "NetworkPolicy", "ServiceAccount", "ServiceAccount"
    ]  # fmt: skip
    own_a = {d.key for d in first.objects if not d.shared}
    own_b = {d.key for d in second.objects if not d.shared}
    assert not own_a & own_b


def test_bundle_configmap_is_immutable_named_by_digest_and_has_the_index() -> None:
    plan = _plan()
    (config_map,) = _by_kind(plan, "ConfigMap").values()
    assert config_map["immutable"] is True
    assert config_map["metadata"]["name"] == f"agent-engine-bundle-{plan.bundle.digest[:12]}"
    assert "index.yaml" in config_map["data"]
    assert plan.bundle.tool_count == 2  # listPets and getPet, not createPet


def test_catalog_change_gives_new_bundle_and_rolls_aer_and_tool() -> None:
    before = _plan()
    after = _plan(config_maps={"petstore-openapi": {"openapi.json": petstore_text(description="v2 pets")}})
    assert before.bundle.digest != after.bundle.digest
    old, new = _by_kind(before, "Deployment"), _by_kind(after, "Deployment")
    for name in ("support-bot-aer", "support-bot-tool"):
        assert (
            old[name]["spec"]["template"]["metadata"]["annotations"][BUNDLE_DIGEST]
            != (new[name]["spec"]["template"]["metadata"]["annotations"][BUNDLE_DIGEST])
        )


def test_a_secret_change_rolls_only_the_components_that_read_it() -> None:
    base = inputs()
    secrets = dict(base.secrets)
    secrets["llm-keys"] = SecretMeta(resource_version="99", keys=frozenset({"openai"}))
    before = _by_kind(_plan(), "Deployment")
    after = _by_kind(_plan(secrets=secrets), "Deployment")

    def checksum(objs: dict[str, Any], name: str) -> str:
        return objs[name]["spec"]["template"]["metadata"]["annotations"][SECRETS_CHECKSUM]

    assert checksum(before, "support-bot-tool") != checksum(after, "support-bot-tool")
    assert checksum(before, "support-bot-aer") == checksum(after, "support-bot-aer")


def test_both_runtimes_know_the_model_endpoint_and_only_the_tool_pod_its_key() -> None:
    deployments = _by_kind(_plan(), "Deployment")
    aer, tool = _env(deployments["support-bot-aer"]), _env(deployments["support-bot-tool"])
    for env in (aer, tool):
        assert env[contract.LLM_BASE_URL_ENV] == "https://llm.example.com:8443/v1"
        assert env[contract.LLM_MODEL_ENV] == "support-model"
        assert env[contract.LLM_API_KEY_ENV_ENV] == "OPENAI_API_KEY"
    assert tool[contract.LLM_CREDENTIAL_NAMES_ENV] == "OPENAI_API_KEY"
    assert contract.LLM_CREDENTIAL_NAMES_ENV not in aer
    plan = _plan()
    aer_ports = {p["port"] for rule in _policy(plan, "aer")["spec"]["egress"] for p in rule.get("ports", [])}
    tool_ports = {
        p["port"] for rule in _policy(plan, "tool")["spec"]["egress"] for p in rule.get("ports", [])
    }
    assert 8443 in tool_ports and 8443 not in aer_ports and 443 not in aer_ports


def test_network_policies_implement_the_trust_table() -> None:
    plan = _plan(**_memory_inputs_kwargs())
    policies = _by_kind(plan, "NetworkPolicy")
    deny = policies["agent-engine-default-deny"]["spec"]
    assert deny["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in deny and "egress" not in deny
    tool = _policy(plan, "tool")["spec"]
    assert tool["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 8002}]
    assert {p["port"] for p in tool["egress"][0]["ports"]} == {443, 8080}  # the connectors' base URLs
    memory = policies["support-bot-memory"]["spec"]
    sources = [
        p["podSelector"]["matchLabels"].get("agentengine.io/component") or p["podSelector"]["matchLabels"]
        for p in memory["ingress"][0]["from"]
    ]
    # Its own Agent's AER and Tool Pod, and the OE's pods (the knowledge documents, issue 37).
    assert sources == ["aer", "tool", dict(SETTINGS.oe_pod_labels)]
    assert memory["ingress"][0]["from"][2]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": SETTINGS.oe_namespace}
    }


def test_a_large_bundle_is_split_across_configmaps_never_truncated() -> None:
    plan = plan_agent(inputs(), settings=RenderSettings(configmap_budget_bytes=1_500))
    config_maps = _by_kind(plan, "ConfigMap")
    assert len(config_maps) >= 2
    keys = [k for cm in config_maps.values() for k in cm["data"]]
    assert len(keys) == len(set(keys)) and "index.yaml" in keys
    whole = plan_agent(inputs(), settings=SETTINGS)
    (single,) = _by_kind(whole, "ConfigMap").values()
    merged = {k: v for cm in config_maps.values() for k, v in cm["data"].items()}
    assert merged == single["data"]
    aer = _by_kind(plan, "Deployment")["support-bot-aer"]
    bundle_volume = next(v for v in aer["spec"]["template"]["spec"]["volumes"] if v["name"] == "bundle")
    assert [s["configMap"]["name"] for s in bundle_volume["projected"]["sources"]] == sorted(config_maps)


@pytest.mark.parametrize("replicas", [0, 3])
def test_replicas_come_from_the_component_spec(replicas: int) -> None:
    plan = _plan(agent=agent_body(components={"tool": {"replicas": replicas}}))
    assert _by_kind(plan, "Deployment")["support-bot-tool"]["spec"]["replicas"] == replicas


def test_an_aer_with_a_checkpoint_store_may_reach_it_and_nothing_else_new() -> None:
    secrets = {**inputs().secrets, "checkpoints": SecretMeta(resource_version="1", keys=frozenset({"uri"}))}

    def aer_ports(**spec: Any) -> set[int]:
        policy = _policy(_plan(agent=agent_body(**spec), secrets=secrets), "aer")
        return {p["port"] for rule in policy["spec"]["egress"] for p in rule.get("ports", [])}

    plain = aer_ports()
    uri = {"name": "MONGODB_URI", "secretKeyRef": {"name": "checkpoints", "key": "uri"}}
    with_store = aer_ports(components={"aer": {"secretEnv": [uri]}})
    assert 27017 not in plain and with_store - plain == {27017}
