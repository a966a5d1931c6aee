"""The operator against the real control plane: rollout, catalog update, zero-write resync, bad input, delete.

The operator runs as a process (`python -m agent_operator`), limited to the test's namespace, with the Helm
chart's own ServiceAccount and RBAC (tests/cluster/operator_harness.py). Writes are
counted twice: by the operator itself (one `api write` log line per write request) and by the API server
(`apiserver_request_total` for the resources the operator manages).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.cluster.controlplane import ControlPlane
from tests.cluster.operator_harness import (
    MANAGED,
    Api,
    RunningOperator,
    apply_all,
    manifests,
    mounted_bundles,
    openapi_text,
    ready,
    terminating_namespaces,
    wait_for,
)
from tests.cluster.test_operator_contract import EXAMPLE_AGENT
from tests.cluster.test_operator_contract import OPENAPI as CONTRACT_OPENAPI
from tests.conftest import REPO_ROOT, Process
from tests.providers.echo_provider import running_echo_provider
from tests.rendered_pods import run_rendered_container

SHARED = "agentengine.io/shared=true"
SHARED_KINDS = ("configmaps", "serviceaccounts", "networkpolicies")
DEFAULT_DENY = "agent-engine-default-deny"


def is_shared(body: dict[str, Any]) -> bool:
    """Shared by the namespace's Agents: labelled so, with no owner and no Agent label."""
    meta = body.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (
        labels.get("agentengine.io/shared") == "true"
        and "agentengine.io/agent" not in labels
        and not meta.get("ownerReferences")
    )


def policy_of(api: Api, deployment: str) -> str:
    """The shared NetworkPolicy that governs a Deployment's pods (named by the digest its pods carry)."""
    body = api.get("deployments", deployment) or {}
    labels = body["spec"]["template"]["metadata"]["labels"]
    return f"agent-engine-{labels['agentengine.io/component']}-{labels['agentengine.io/network-policy']}"


def test_rollout_update_noop_resync_and_delete(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    operator = start_operator()
    objs = manifests(api.namespace)
    apply_all(api, objs)
    agent = ready(api)

    # Every child object is there: the Agent's own ones owned by it, the namespace's shared ones by nobody.
    bundle = agent["status"]["bundle"]
    assert bundle["toolCount"] == 2 and len(bundle["configMaps"]) == 1
    assert bundle["configMaps"][0].startswith("agent-engine-bundle-"), bundle
    for kind, names in {
        "deployments": ["bot-aer", "bot-tool"],
        "services": ["bot-aer", "bot-tool"],
        "secrets": ["bot-runtime-token"],
    }.items():
        for name in names:
            child = api.get(kind, name)
            assert child is not None, f"{kind}/{name} missing"
            assert child["metadata"]["ownerReferences"][0]["uid"] == agent["metadata"]["uid"]
    for kind, names in {
        "serviceaccounts": ["agent-engine-aer", "agent-engine-tool"],
        "networkpolicies": [DEFAULT_DENY, policy_of(api, "bot-aer"), policy_of(api, "bot-tool")],
        "configmaps": bundle["configMaps"],
    }.items():
        for name in names:
            child = api.get(kind, name)
            assert child is not None, f"{kind}/{name} missing"
            assert is_shared(child), child["metadata"]
    for component in ("aer", "tool"):
        pod_spec = (api.get("deployments", f"bot-{component}") or {})["spec"]["template"]["spec"]
        assert pod_spec["serviceAccountName"] == f"agent-engine-{component}"
    # No per-Agent copies of what is shared.
    assert api.list("serviceaccounts", "agentengine.io/agent=bot") == []
    assert [p["metadata"]["name"] for p in api.list("networkpolicies", "agentengine.io/agent=bot")] == []
    for name in ("bot-aer", "bot-tool"):
        deployment = api.get("deployments", name) or {}
        available = {c["type"]: c["status"] for c in deployment["status"]["conditions"]}
        assert available["Available"] == "True"
    liveness = httpx.get(operator.liveness, timeout=10)
    assert liveness.status_code == 200 and "api_requests" in liveness.json()
    lines = [line for line in operator.process.output().splitlines() if line.strip()]
    assert lines and all(isinstance(json.loads(line), dict) for line in lines)  # JSON logs only
    wait_for(
        "a Normal Event on becoming Ready",
        lambda: any(e["reason"] == "Ready" and e["type"] == "Normal" for e in api.events("bot")),
    )
    connector = wait_for("Connector status", lambda: (api.get("connectors", "petstore") or {}).get("status"))
    assert connector["toolCount"] == 2 and connector["digest"]

    # A catalog update gives a new bundle ConfigMap and a rollout; the old bundle goes once unused.
    old_bundle = bundle["configMaps"][0]
    old_rs = {rs["metadata"]["name"] for rs in api.list("replicasets", "agentengine.io/agent=bot")}
    api.must_apply(manifests(api.namespace, catalog=openapi_text(description="v2"))["catalog"])
    wait_for(
        "a new bundle",
        lambda: (api.get("agents", "bot") or {})["status"]["bundle"]["configMaps"] != [old_bundle],
    )
    agent = ready(api)
    new_bundle = agent["status"]["bundle"]["configMaps"][0]
    assert mounted_bundles(api, "bot-aer") == [new_bundle] == mounted_bundles(api, "bot-tool")
    new_rs = {rs["metadata"]["name"] for rs in api.list("replicasets", "agentengine.io/agent=bot")}
    assert len(new_rs - old_rs) == 2  # one new ReplicaSet per Deployment: a rolling update
    wait_for("the superseded bundle deleted", lambda: api.get("configmaps", old_bundle) is None)

    # No-op resync: a restarted operator re-reads everything and writes nothing.
    time.sleep(2)  # let status settle after the rollout
    versions = {
        (kind, o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for kind in MANAGED
        for o in api.list(kind)
    }
    # The write counter is cluster-wide: let earlier tests' namespace deletions (the namespace controller's
    # DELETEs) finish first, so only this test's clients can move it.
    wait_for("no namespace terminating", lambda: not terminating_namespaces(api), timeout=120)
    server_before = api.server_writes()
    operator.process.stop()
    restarted = start_operator()
    wait_for(
        "the restarted operator to reconcile the Agent",
        lambda: '"agent reconciled"' in restarted.process.output(),
    )
    time.sleep(3)  # room for any late write to show up
    assert restarted.writes() == 0, restarted.process.output()[-3000:]
    assert api.server_writes() == server_before
    after = {
        (kind, o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for kind in MANAGED
        for o in api.list(kind)
    }
    assert after == versions

    # Delete: ownerReferences and the garbage collector remove the Agent's own children; no finalizer
    # hangs. The shared objects lost their last user: the operator deletes them once no pod uses them.
    api.delete("agents", "bot")
    wait_for("the Agent gone", lambda: api.get("agents", "bot") is None)
    for kind in ("deployments", "services", "networkpolicies", "secrets"):
        wait_for(
            f"{kind} of bot gone",
            lambda kind=kind: not api.list(kind, "agentengine.io/agent=bot"),
            timeout=60,
        )
    for kind in SHARED_KINDS:
        wait_for(f"shared {kind} gone", lambda kind=kind: not api.list(kind, SHARED), timeout=90)


BAD_INPUTS = [
    ("ConnectorMissing", "agent", lambda m: m["agent"]["spec"].update(connectors=["petstore", "ghost"])),
    (
        "CatalogMissing",
        "connector",
        lambda m: m["connector"]["spec"]["catalog"]["configMapKeyRef"].update(name="nope"),
    ),
    (
        "CatalogKeyMissing",
        "connector",
        lambda m: m["connector"]["spec"]["catalog"]["configMapKeyRef"].update(key="x.yaml"),
    ),
    ("CatalogInvalid", "catalog", lambda m: m["catalog"]["data"].update({"openapi.json": "{not an api"})),
    (
        "ExposeAllowUnknown",
        "connector",
        lambda m: m["connector"]["spec"]["expose"].update(allow=["listPets", "nukePets"]),
    ),
    ("ImageInvalid", "agent", lambda m: m["agent"]["spec"].update(image="Not A Valid/Image")),
]


def test_bad_input_gives_condition_and_event_and_keeps_the_last_good_bundle(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator()
    good = manifests(api.namespace)
    apply_all(api, good)
    good_bundle = ready(api)["status"]["bundle"]["configMaps"]
    for reason, key, breaks in BAD_INPUTS:
        bad = manifests(api.namespace)
        breaks(bad)
        api.must_apply(bad[key])
        cond = wait_for(
            f"Ready False {reason}",
            lambda reason=reason: (c := api.condition("bot")).get("reason") == reason and c,
        )
        assert cond["status"] == "False" and cond["message"], cond
        wait_for(
            f"an Event {reason}", lambda reason=reason: any(e["reason"] == reason for e in api.events("bot"))
        )
        assert mounted_bundles(api, "bot-aer") == good_bundle == mounted_bundles(api, "bot-tool")
        assert all(api.get("configmaps", name) for name in good_bundle)
        api.must_apply(good[key])
        ready(api)
        assert (api.get("agents", "bot") or {})["status"]["bundle"]["configMaps"] == good_bundle


def test_path_escape_and_bad_fields_are_refused_at_admission(api: Api) -> None:
    objs = manifests(api.namespace)
    objs["connector"]["spec"]["catalog"]["configMapKeyRef"]["key"] = "../etc/passwd"
    refused = api.apply(objs["connector"])
    assert refused.status_code == 422 and "spec.catalog.configMapKeyRef.key" in refused.text
    objs = manifests(api.namespace)
    objs["connector"]["spec"]["auth"] = {"type": "bearer"}
    refused = api.apply(objs["connector"])
    assert refused.status_code == 422 and "auth.env and auth.secretKeyRef are required" in refused.text


def test_a_referenced_secret_change_rolls_only_the_pods_that_use_it(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator()
    objs = manifests(api.namespace)
    apply_all(api, objs)
    ready(api)

    def checksum(name: str) -> str:
        body = api.get("deployments", name) or {}
        return body["spec"]["template"]["metadata"]["annotations"]["agentengine.io/secrets-checksum"]

    aer, tool = checksum("bot-aer"), checksum("bot-tool")
    # LLM credentials reach the Tool Pod only (model calls run there): rotating them leaves the AER alone.
    objs["llm"]["stringData"] = {"openai": "rotated-llm-key"}
    api.must_apply(objs["llm"])
    wait_for("the Tool Pod rolled", lambda: checksum("bot-tool") != tool)
    assert checksum("bot-aer") == aer
    ready(api)


def test_periodic_resync_writes_nothing_and_recreates_a_deleted_child(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    operator = start_operator(resync_seconds=1)
    apply_all(api, manifests(api.namespace))
    ready(api)
    time.sleep(2)
    writes = operator.writes()
    resyncs = operator.process.output().count('"agent reconciled"')
    wait_for(
        "three more resyncs", lambda: operator.process.output().count('"agent reconciled"') >= resyncs + 3
    )
    assert operator.writes() == writes

    api.delete("services", "bot-aer")
    wait_for("the Service recreated", lambda: api.get("services", "bot-aer") is not None)
    # The operator logs its write once the answer is read: the log line may follow the object by a moment.
    wait_for("the recreation logged", lambda: operator.writes() > writes, timeout=5)
    time.sleep(2)
    assert operator.writes() == writes + 1


def test_two_replicas_with_peering_only_one_acts(
    api: Api, cluster: ControlPlane, start_operator: Callable[..., RunningOperator]
) -> None:
    cluster.kubectl("apply", "--server-side", "-f", str(REPO_ROOT / "crds" / "kopf.dev_peerings.yaml"))
    cluster.kubectl("wait", "--for=condition=Established", "crd/kopfpeerings.kopf.dev", "--timeout=60s")
    peering = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": "agent-engine"}}
    response = api.http.patch(
        f"/apis/kopf.dev/v1/namespaces/{api.namespace}/kopfpeerings/agent-engine",
        params={"fieldManager": "test", "force": "true"},
        content=json.dumps(peering),
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert response.is_success, response.text
    replicas = {"operator.replicas": "2"}  # the chart's Role then allows the peering objects
    low = start_operator(
        resync_seconds=1,
        extra_env={"AGENT_OPERATOR_PEERING": "agent-engine", "AGENT_OPERATOR_PRIORITY": "10"},
        chart_values=replicas,
    )
    high = start_operator(
        resync_seconds=1,
        extra_env={"AGENT_OPERATOR_PEERING": "agent-engine", "AGENT_OPERATOR_PRIORITY": "20"},
        chart_values=replicas,
    )
    wait_for(
        "the low-priority replica to pause", lambda: "Pausing operations" in low.process.output(), timeout=30
    )
    apply_all(api, manifests(api.namespace))
    ready(api)
    time.sleep(3)  # several resync rounds
    assert high.writes() > 0
    assert low.writes() == 0, low.process.output()[-3000:]


def test_memory_component_gets_only_the_database_secret(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator()
    objs = manifests(api.namespace)
    objs["db"] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "memory-db", "namespace": api.namespace},
        "stringData": {"uri": "mongodb://user:pw@db.example.com:27017"},
    }
    objs["agent"]["spec"]["components"] = {
        "memory": {
            "enabled": True,
            "store": {"type": "mongodb", "uriSecretRef": {"name": "memory-db", "key": "uri"}},
        }
    }
    api.must_apply(objs["db"])
    apply_all(api, objs)
    agent = ready(api)
    assert {c["type"]: c["reason"] for c in agent["status"]["conditions"]}["MemoryReady"] == "Available"

    def env_names(name: str) -> set[str]:
        deployment = api.get("deployments", name) or {}
        return {e["name"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}

    assert "MEMORY_MONGODB_URI" in env_names("bot-memory")
    assert "MEMORY_MONGODB_URI" not in env_names("bot-aer") | env_names("bot-tool")
    # LLM credentials reach the Tool Pod only (model calls run there).
    assert "OPENAI_API_KEY" not in env_names("bot-memory") | env_names("bot-aer")
    assert "PETSTORE_TOKEN" not in env_names("bot-memory") | env_names("bot-aer")
    # Memory's NetworkPolicy is the Agent's own (it admits only this Agent's pods); its account is shared.
    memory_policy = api.get("networkpolicies", "bot-memory") or {}
    assert memory_policy["metadata"]["ownerReferences"][0]["uid"] == agent["metadata"]["uid"]
    assert is_shared(api.get("serviceaccounts", "agent-engine-memory") or {})
    pod_spec = (api.get("deployments", "bot-memory") or {})["spec"]["template"]["spec"]
    assert pod_spec["serviceAccountName"] == "agent-engine-memory"

    # Turning memory off deletes its children; the rest stays untouched.
    aer_version = (api.get("services", "bot-aer") or {})["metadata"]["resourceVersion"]
    objs["agent"]["spec"]["components"] = {}
    began = time.monotonic()
    api.must_apply(objs["agent"])
    wait_for("MemoryReady Disabled", lambda: api.condition("bot", "MemoryReady").get("reason") == "Disabled")
    for kind in ("deployments", "services", "networkpolicies"):
        wait_for(f"{kind}/bot-memory deleted", lambda kind=kind: api.get(kind, "bot-memory") is None)
    print(f"measured: memory disabled -> its children deleted: {time.monotonic() - began:.2f}s")
    # No Agent uses the shared memory account any more: it goes once the Memory pods' ReplicaSet is gone.
    wait_for(
        "the shared memory ServiceAccount deleted",
        lambda: api.get("serviceaccounts", "agent-engine-memory") is None,
        timeout=90,
    )
    ready(api)
    assert (api.get("services", "bot-aer") or {})["metadata"]["resourceVersion"] == aer_version
    aer_env = env_names("bot-aer")
    assert "AGENTIC_MEMORY_URL" not in aer_env  # the AER rolled without the Memory URL


def test_operator_rendered_pods_run_locally_and_serve_a_tool_call(
    api: Api, start_operator: Callable[..., RunningOperator], spawn: Callable[..., Process], tmp_path: Path
) -> None:
    """The contract test on what the operator really applied: Deployments, bundle ConfigMap and Secrets
    read back from the API server, run as local processes, one real tool call through the Tool Pod."""
    start_operator()
    with running_echo_provider() as provider:
        objs = manifests(api.namespace, catalog=json.dumps(CONTRACT_OPENAPI))
        objs["connector"]["spec"]["source"]["baseUrl"] = f"{provider.url}/echo"
        objs["connector"]["spec"]["expose"]["allow"] = ["getThing"]
        objs["agent"]["spec"]["entrypoint"] = "echo_agent.agent:app"
        objs["agent"]["spec"]["components"] = {
            "tool": {
                "secretEnv": [
                    {"name": "ECHO_SIGNING_KEY", "secretKeyRef": {"name": "tool-keys", "key": "sign"}}
                ]
            }
        }
        api.must_apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "tool-keys", "namespace": api.namespace},
                "stringData": {"sign": "signing-key-value"},
            }
        )
        apply_all(api, objs)
        agent = ready(api)

        config_maps = {
            name: (api.get("configmaps", name) or {})["data"]
            for name in agent["status"]["bundle"]["configMaps"]
        }
        secrets = {
            name: {
                k: base64.b64decode(v).decode() for k, v in (api.get("secrets", name) or {})["data"].items()
            }
            for name in ("bot-runtime-token", "petstore-creds", "llm-keys", "tool-keys")
        }
        token = secrets["bot-runtime-token"]["token"]
        procs = {
            component: run_rendered_container(
                deployment=api.get("deployments", f"bot-{component}") or {},
                config_maps=config_maps,
                secrets=secrets,
                root=tmp_path / component,
                spawn=spawn,
                pythonpath=f"{EXAMPLE_AGENT}:{REPO_ROOT}",
            )
            for component in ("aer", "tool")
        }
        with httpx.Client(timeout=10) as http:
            for component, (_, port) in procs.items():
                assert http.get(f"http://127.0.0.1:{port}/readyz").status_code == 200, component
            tool_port = procs["tool"][1]
            answer = http.post(
                f"http://127.0.0.1:{tool_port}/execute",
                headers={"Authorization": f"Bearer {token}"},
                json={"tool": "petstore_getThing", "arguments": {"thingId": "t-7"}, "execution_id": "e1"},
            )
    assert answer.status_code == 200, answer.text
    outcome = answer.json()
    assert outcome["status"] == "success", outcome
    echoed = outcome["result"]["body"] if "body" in outcome["result"] else outcome["result"]
    assert echoed["path"] == "/echo/things/t-7"
    # The provider got the Secret's value; what the Tool Pod answers has it redacted (issue 27).
    assert echoed["headers"]["authorization"] == "Bearer [REDACTED]"
    assert "provider-token-value" not in answer.text


def test_a_bundle_over_one_configmap_is_split_and_mounted_whole(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator(extra_env={"AGENT_OPERATOR_CONFIGMAP_BUDGET_BYTES": "1300"})
    apply_all(api, manifests(api.namespace))
    agent = ready(api)
    names = agent["status"]["bundle"]["configMaps"]
    assert len(names) >= 2
    assert mounted_bundles(api, "bot-aer") == names == mounted_bundles(api, "bot-tool")
    keys = [key for name in names for key in (api.get("configmaps", name) or {})["data"]]
    assert "index.yaml" in keys and len(keys) == len(set(keys))
