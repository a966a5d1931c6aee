"""The operator attacked as a platform team would (issue 12): every failure found, reproduced for real.

Each test runs the operator as a process with the chart's own identity (tests/cluster/operator_harness.py)
against the real control plane, feeds it the bad input or the hand edit, and waits for the right condition,
Event or repair. Elapsed times are printed as `measured:` lines (never asserted).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_operator.controller import Operator
from agent_operator.kube import Connection, KubeApi
from agent_operator.models import Agent
from agent_operator.reader import InputReader
from agent_operator.settings import OperatorSettings
from tests.cluster.controlplane import ControlPlane
from tests.cluster.operator_harness import (
    Api,
    RunningOperator,
    apply_all,
    chart_identity,
    manifests,
    ready,
    wait_for,
)
from tests.cluster.test_operator_contract import EXAMPLE_AGENT
from tests.conftest import REPO_ROOT, Process
from tests.rendered_pods import run_rendered_container


def measured(what: str, since: float) -> float:
    elapsed = time.monotonic() - since
    print(f"measured: {what}: {elapsed:.2f}s")
    return elapsed


def peak_rss_mib(pid: int) -> float:
    """Peak resident set (VmHWM) of the process plus its children (the catalog compiler), in MiB."""
    total = 0
    pids = [pid]
    while pids:
        current = pids.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            for task in Path(f"/proc/{current}/task").iterdir():
                pids += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
    return total / 1024


def kubectl(cluster: ControlPlane, namespace: str, *args: str, check: bool = True) -> str:
    result = cluster.kubectl("--namespace", namespace, *args, check=check)
    return result.stdout + result.stderr


def agent_manifest(namespace: str, name: str, connectors: list[str]) -> dict[str, Any]:
    body = manifests(namespace)["agent"]
    body["metadata"]["name"] = name
    body["spec"]["connectors"] = connectors
    return body


def connector_manifest(namespace: str, name: str, *, config_map: str, base_url: str) -> dict[str, Any]:
    body = manifests(namespace)["connector"]
    body["metadata"]["name"] = name
    body["spec"]["source"]["baseUrl"] = base_url
    body["spec"]["catalog"]["configMapKeyRef"]["name"] = config_map
    return body


def reconciles(operator: RunningOperator, agent: str) -> int:
    return sum(
        1 for r in operator.log_lines() if r.get("message") == "agent reconciled" and r.get("agent") == agent
    )


def condition_reason(api: Api, agent: str, reason: str, kind: str = "Ready") -> Callable[[], Any]:
    return lambda: (c := api.condition(agent, kind)).get("reason") == reason and c


# --- 1. an exception in one Agent's reconcile -------------------------------------------------------------


def test_a_reconcile_that_raises_gets_a_condition_and_never_stops_the_resync(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    operator = start_operator(resync_seconds=1)
    objs = manifests(api.namespace)
    for key in ("catalog", "creds", "llm", "connector"):
        api.must_apply(objs[key])
    # The bad Agent comes first, so a resync that stops at it never reaches the good one.
    began = time.monotonic()
    api.must_apply(
        connector_manifest(
            api.namespace,
            "broken",
            config_map="petstore-openapi",
            base_url="https://api.example.com:99999/v1",
        )
    )
    api.must_apply(agent_manifest(api.namespace, "aaa", ["broken"]))
    api.must_apply(agent_manifest(api.namespace, "zzz", ["petstore"]))
    cond = wait_for("aaa refused", lambda: (c := api.condition("aaa")).get("status") == "False" and c)
    measured("port 99999 -> condition", began)
    assert "spec.source.baseUrl" in cond["message"] and "99999" in cond["message"], cond
    wait_for("a Warning Event on aaa", lambda: any(e["type"] == "Warning" for e in api.events("aaa")))
    ready(api, "zzz")
    # The resync goes on past the bad Agent, round after round.
    seen = reconciles(operator, "zzz")
    wait_for("three more resyncs of zzz", lambda: reconciles(operator, "zzz") >= seen + 3, timeout=30)


def _operator_in_process(cluster: ControlPlane, namespace: str) -> Operator:
    """The operator's controller in this process, as the chart's ServiceAccount (no kopf, no watches)."""
    kubeconfig = chart_identity(cluster, namespace=namespace, release=f"ae-{namespace}")
    config = yaml.safe_load(kubeconfig.read_text())
    connection = Connection(
        server=config["clusters"][0]["cluster"]["server"],
        ca_pem=base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode(),
        token=config["users"][0]["user"]["token"],
    )
    settings = OperatorSettings(namespaces=(namespace,), compile_timeout_seconds=0)
    return Operator(KubeApi(connection), settings)


class _FailingReader(InputReader):
    """A reader with a bug for one Agent: what an unexpected exception in a reconcile looks like."""

    async def agent_inputs(self, agent: Agent) -> Any:
        if agent.meta.name == "aaa":
            raise RuntimeError("unexpected at https://user:hunter2@api.example.com/v1 (a bug)")
        return await super().agent_inputs(agent)


def test_an_unexpected_exception_is_a_condition_an_event_and_one_traceback_and_the_resync_goes_on(
    api: Api, cluster: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    objs = manifests(api.namespace)
    for key in ("catalog", "creds", "llm", "connector"):
        api.must_apply(objs[key])
    api.must_apply(agent_manifest(api.namespace, "aaa", ["petstore"]))
    api.must_apply(agent_manifest(api.namespace, "zzz", ["petstore"]))
    op = _operator_in_process(cluster, api.namespace)
    op.reader = _FailingReader(op.api, op.compiler)
    for name in ("aaa", "zzz"):
        op.agents[(api.namespace, name)] = api.get("agents", name) or {}

    async def rounds() -> list[bool]:
        results = []
        try:
            for _ in range(3):  # what the resync does, round after round
                op.forget_applied()
                for key in sorted(op.agents):
                    results.append(await op.reconcile_agent(key))
        finally:
            await op.aclose()
        return results

    with caplog.at_level(logging.INFO, logger="agent_operator"):
        results = asyncio.run(rounds())
    assert results == [False, True] * 3
    cond = api.condition("aaa")
    assert cond["status"] == "False" and cond["reason"] == "ReconcileFailed", cond
    assert "RuntimeError" in cond["message"] and "hunter2" not in cond["message"], cond
    events = [e for e in api.events("aaa") if e["reason"] == "ReconcileFailed"]
    assert len(events) == 1 and "hunter2" not in events[0]["message"]
    tracebacks = [r.__dict__["traceback"] for r in caplog.records if "traceback" in r.__dict__]
    assert len(tracebacks) == 1 and "Traceback (most recent call last)" in tracebacks[0], tracebacks
    assert "hunter2" not in tracebacks[0] and "https://***@api.example.com" in tracebacks[0]
    assert (
        sum(r.getMessage() == "agent reconciled" and r.__dict__.get("agent") == "zzz" for r in caplog.records)
        == 3
    )
    assert "hunter2" not in caplog.text


# --- 3. a hostile document ---------------------------------------------------------------------------------


def billion_laughs(levels: int) -> str:
    """Nested aliases in a parameter's default, which the compiler copies into the tool's input schema."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    lines += [
        "openapi: 3.0.3",
        "info: {title: laughs, version: '1'}",
        "paths:",
        "  /lol:",
        "    get:",
        "      operationId: lol",
        "      parameters:",
        f"        - {{name: q, in: query, schema: {{type: array, default: *a{levels}}}}}",
        "      responses: {'200': {description: ok}}",
    ]
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_document_is_refused_without_freezing_the_operator(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    operator = start_operator()
    objs = manifests(api.namespace)
    apply_all(api, objs)
    ready(api)
    began = time.monotonic()
    api.must_apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "laughs", "namespace": api.namespace},
            "data": {"openapi.yaml": billion_laughs(6)},
        }
    )
    hostile = connector_manifest(
        api.namespace, "laughs", config_map="laughs", base_url="https://laughs.example.com"
    )
    hostile["spec"]["catalog"]["configMapKeyRef"]["key"] = "openapi.yaml"
    hostile["spec"]["expose"] = {}
    api.must_apply(hostile)
    api.must_apply(agent_manifest(api.namespace, "victim", ["laughs"]))
    time.sleep(1)  # the operator is at the document now
    # Meanwhile another Agent's change is handled.
    changed = time.monotonic()
    objs["agent"]["spec"]["components"] = {"aer": {"replicas": 2}}
    api.must_apply(objs["agent"])
    wait_for(
        "bot's AER scaled while the hostile document is handled",
        lambda: ((api.get("deployments", "bot-aer") or {}).get("spec") or {}).get("replicas") == 2,
        timeout=120,
    )
    measured("another Agent's change applied during the hostile document", changed)
    print(f"measured: operator peak RSS so far: {peak_rss_mib(operator.pid):.0f} MiB")
    cond = wait_for(
        "victim CatalogTooComplex",
        condition_reason(api, "victim", "CatalogTooComplex", "BundleReady"),
        timeout=120,
    )
    measured("billion laughs -> CatalogTooComplex", began)
    assert "laughs" in cond["message"] and "openapi.yaml" in cond["message"], cond
    connector = wait_for(
        "the Connector's own status",
        lambda: (c := api.get("connectors", "laughs") or {}).get("status", {}).get("conditions") and c,
    )
    assert connector["status"]["conditions"][0]["reason"] == "CatalogTooComplex"
    print(f"measured: operator peak RSS with a 6-level billion laughs: {peak_rss_mib(operator.pid):.0f} MiB")
    ready(api)  # the good Agent is untouched


# --- 4. hand edits and tampering ---------------------------------------------------------------------------


def _container(api: Api, deployment: str) -> dict[str, Any]:
    return (api.get("deployments", deployment) or {})["spec"]["template"]["spec"]["containers"][0]


def _env(api: Api, deployment: str) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in _container(api, deployment)["env"]}


def test_hand_edits_to_owned_fields_are_reverted_when_the_watch_reports_them(
    api: Api, cluster: ControlPlane, start_operator: Callable[..., RunningOperator]
) -> None:
    operator = start_operator()
    objs = manifests(api.namespace)
    apply_all(api, objs)
    ready(api)
    image = _container(api, "bot-aer")["image"]
    oe_url = _env(api, "bot-aer")["AGENTIC_OE_URL"]
    ns = api.namespace

    began = time.monotonic()
    kubectl(cluster, ns, "set", "image", "deployment/bot-aer", "aer=attacker.example.com/evil:1")
    wait_for("the image reverted", lambda: _container(api, "bot-aer")["image"] == image)
    measured("kubectl set image -> reverted", began)

    began = time.monotonic()
    kubectl(cluster, ns, "set", "env", "deployment/bot-aer", "AGENTIC_OE_URL=http://attacker.example.com")
    kubectl(cluster, ns, "set", "env", "deployment/bot-tool", "HTTPS_PROXY=http://attacker.example.com:3128")
    wait_for("the env value reverted", lambda: _env(api, "bot-aer")["AGENTIC_OE_URL"] == oe_url)
    wait_for("the added env var removed", lambda: "HTTPS_PROXY" not in _env(api, "bot-tool"))
    measured("kubectl set env -> reverted", began)

    began = time.monotonic()
    kubectl(cluster, ns, "scale", "deployment/bot-aer", "--replicas=0")
    wait_for(
        "the replicas reverted", lambda: (api.get("deployments", "bot-aer") or {})["spec"]["replicas"] == 1
    )
    measured("kubectl scale -> reverted", began)

    # The Tool Pods' NetworkPolicy is shared by the namespace's Agents with the same rules: reconciling one
    # of them (here the only one) puts it back.
    began = time.monotonic()
    (policy,) = api.list("networkpolicies", "agentengine.io/component=tool,agentengine.io/shared=true")
    policy_name, spec = policy["metadata"]["name"], policy["spec"]
    kubectl(
        cluster, ns, "patch", f"networkpolicy/{policy_name}", "--type=merge",
        "-p", json.dumps({"spec": {"egress": [{}]}}),
    )  # fmt: skip
    wait_for(
        "the NetworkPolicy reverted",
        lambda: (api.get("networkpolicies", policy_name) or {})["spec"] == spec,
    )
    measured("NetworkPolicy opened -> reverted", began)

    # The bundle ConfigMap replaced under the same name with another base URL.
    name = (api.get("agents", "bot") or {})["status"]["bundle"]["configMaps"][0]
    original = (api.get("configmaps", name) or {})["data"]
    forged = {
        k: v.replace("https://petstore.example.com/v1", "https://attacker.example.com")
        for k, v in original.items()
    }
    assert forged != original
    uid = (api.get("configmaps", name) or {})["metadata"]["uid"]
    began = time.monotonic()
    api.delete("configmaps", name)

    def gone_or_recreated() -> bool:
        # Under load the operator may put the real one back between two polls: a new uid counts too.
        live = api.get("configmaps", name)
        return live is None or live["metadata"]["uid"] != uid

    wait_for("the bundle ConfigMap gone", gone_or_recreated, interval=0.05)
    forged_cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"agentengine.io/agent": "bot"}},
        "data": forged,
    }
    created = api.http.post(api.path("configmaps"), json=forged_cm)
    if created.status_code == 409:  # the operator was faster: it already put the real one back
        pass
    else:
        assert created.is_success, created.text
    wait_for("the bundle restored", lambda: (api.get("configmaps", name) or {}).get("data") == original)
    measured("forged bundle ConfigMap -> restored", began)

    # A hand edit made while the operator is down is repaired when it starts.
    operator.process.stop()
    kubectl(cluster, ns, "set", "image", "deployment/bot-tool", "tool=attacker.example.com/evil:2")
    began = time.monotonic()
    restarted = start_operator()
    wait_for("the image reverted after a restart", lambda: _container(api, "bot-tool")["image"] == image)
    measured("set image while stopped -> reverted after start", began)
    ready(api)
    time.sleep(3)  # no fight: a settled world costs no writes
    writes = restarted.writes()
    time.sleep(3)
    assert restarted.writes() == writes, restarted.process.output()[-3000:]


def test_the_runtime_refuses_to_start_on_a_bundle_that_does_not_match_its_digest(
    api: Api, start_operator: Callable[..., RunningOperator], spawn: Callable[..., Process], tmp_path: Path
) -> None:
    start_operator()
    objs = manifests(api.namespace)
    objs["agent"]["spec"]["entrypoint"] = "echo_agent.agent:app"
    apply_all(api, objs)
    agent = ready(api)
    config_maps = {
        name: (api.get("configmaps", name) or {})["data"] for name in agent["status"]["bundle"]["configMaps"]
    }
    forged = {
        name: {
            k: v.replace("https://petstore.example.com/v1", "https://attacker.example.com")
            for k, v in data.items()
        }
        for name, data in config_maps.items()
    }
    assert forged != config_maps
    deployment = api.get("deployments", "bot-tool") or {}
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env.get("AGENTIC_CONNECTOR_BUNDLE_DIGEST") == agent["status"]["bundle"]["digest"]
    secrets = {
        "bot-runtime-token": {"token": "t"},
        "petstore-creds": {"token": "p"},
        "llm-keys": {"openai": "k"},
    }

    def start(bundle: dict[str, dict[str, str]], root: Path) -> Any:
        return run_rendered_container(
            deployment=deployment,
            config_maps=bundle,
            secrets=secrets,
            root=root,
            spawn=spawn,
            pythonpath=f"{EXAMPLE_AGENT}:{REPO_ROOT}",
            overrides={"ECHO_SIGNING_KEY": "signing-key-for-test"},  # the echo agent's tool needs it
        )

    with pytest.raises(RuntimeError, match="exited"):
        start(forged, tmp_path / "forged")
    start(config_maps, tmp_path / "real")  # the bundle as rendered: it starts


# --- 5. names and apply order ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["my.agent", "1agent"])
def test_agent_names_the_operator_cannot_derive_from_are_refused_at_admission(api: Api, name: str) -> None:
    refused = api.apply(agent_manifest(api.namespace, name, []))
    assert refused.status_code == 422, refused.text
    assert "metadata.name" in refused.text and "e.g." in refused.text, refused.text


def test_connector_names_the_compiler_refuses_are_refused_at_admission(api: Api) -> None:
    for name in ("my.api", "1api"):
        refused = api.apply(
            connector_manifest(
                api.namespace, name, config_map="petstore-openapi", base_url="https://x.example.com"
            )
        )
        assert refused.status_code == 422, refused.text
        assert "metadata.name" in refused.text and "letter" in refused.text, refused.text


def test_network_policies_come_first_and_no_workload_starts_when_another_object_failed(
    api: Api, cluster: ControlPlane, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator()
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-services", "namespace": api.namespace},
        "spec": {"hard": {"services": "0"}},
    }
    created = api.http.post(api.path("resourcequotas"), json=quota)
    assert created.is_success, created.text
    wait_for(
        "the quota observed",
        lambda: ((api.get("resourcequotas", "no-services") or {}).get("status") or {}).get("hard"),
    )
    began = time.monotonic()
    apply_all(api, manifests(api.namespace))
    cond = wait_for(
        "Ready False naming the Service",
        lambda: (
            (c := api.condition("bot")).get("status") == "False" and "Service" in c.get("message", "") and c
        ),
    )
    measured("Service refused -> condition", began)
    assert "quota" in cond["message"].lower(), cond
    wait_for("a Warning Event", lambda: any(e["type"] == "Warning" for e in api.events("bot")))
    assert api.list("deployments") == []
    # The NetworkPolicies bot needs (shared by the namespace's Agents: bot is the only one) are there.
    names = sorted(p["metadata"]["name"] for p in api.list("networkpolicies", "agentengine.io/shared=true"))
    assert len(names) == 3, names
    assert names[0].startswith("agent-engine-aer-") and names[1] == "agent-engine-default-deny", names
    assert names[2].startswith("agent-engine-tool-"), names

    api.http.delete(api.path("resourcequotas", "no-services"))
    ready(api)
    versions = {
        "networkpolicies": [int(o["metadata"]["resourceVersion"]) for o in api.list("networkpolicies")],
        "deployments": [
            int(o["metadata"]["resourceVersion"]) for o in api.list("deployments", "agentengine.io/agent=bot")
        ],
    }
    assert len(versions["networkpolicies"]) == 3 and len(versions["deployments"]) == 2, versions
    assert max(versions["networkpolicies"]) < min(versions["deployments"]), versions


# --- 6. a referenced object created late -------------------------------------------------------------------


def test_a_newly_created_referenced_secret_or_config_map_is_noticed_within_seconds(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator()  # no periodic resync: only the watch can notice
    objs = manifests(api.namespace)
    for key in ("catalog", "creds", "connector", "agent"):
        api.must_apply(objs[key])
    wait_for("SecretMissing", condition_reason(api, "bot", "SecretMissing"))
    began = time.monotonic()
    api.must_apply(objs["llm"])
    ready(api)
    measured("missing Secret created -> Ready", began)

    api.delete("configmaps", "petstore-openapi")
    objs["agent"]["spec"]["image"] = "registry.example.com/team/bot:1.0.1"  # a re-render reads the catalog
    api.must_apply(objs["agent"])
    wait_for("CatalogMissing", condition_reason(api, "bot", "CatalogMissing"))
    began = time.monotonic()
    api.must_apply(objs["catalog"])
    ready(api)
    measured("missing ConfigMap created -> Ready", began)


# --- 7. delete --------------------------------------------------------------------------------------------


def test_an_agent_being_deleted_gets_no_writes(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    operator = start_operator()
    objs = manifests(api.namespace)
    objs["agent"]["spec"]["components"] = {"memory": {"enabled": True}}
    apply_all(api, objs)
    ready(api)
    time.sleep(1)
    # Counted in the Agent's namespace: its children and status (withdrawing the OE registration, in the
    # OE's namespace, is the one write a deletion calls for). The namespace's shared objects, which this
    # Agent alone used, are the operator's to delete once no pod uses them: those DELETEs are the only
    # writes allowed.
    where = f"/namespaces/{api.namespace}/"
    before = len(operator.log_lines())
    # Foreground: the Agent stays (with a deletionTimestamp) while the garbage collector removes its children.
    api.http.delete(api.path("agents", "bot"), params={"propagationPolicy": "Foreground"})
    wait_for("the Agent gone", lambda: api.get("agents", "bot") is None, timeout=90)
    for kind in ("configmaps", "serviceaccounts", "networkpolicies"):
        wait_for(
            f"the shared {kind} deleted",
            lambda kind=kind: not api.list(kind, "agentengine.io/shared=true"),
            timeout=90,
        )
    time.sleep(2)
    writes = [
        (r.get("verb"), r.get("path", ""))
        for r in operator.log_lines()[before:]
        if r.get("message") == "api write" and where in r.get("path", "")
    ]
    shared_kinds = (
        "/configmaps/agent-engine-",
        "/serviceaccounts/agent-engine-",
        "/networkpolicies/agent-engine-",
    )
    others = [
        (verb, path) for verb, path in writes if verb != "DELETE" or not any(k in path for k in shared_kinds)
    ]
    assert writes and others == [], (writes, operator.process.output()[-4000:])
    for kind in ("deployments", "services", "networkpolicies"):
        assert api.list(kind, "agentengine.io/agent=bot") == []


# --- 8. large documents ------------------------------------------------------------------------------------


def large_openapi(operations: int) -> str:
    paths = {}
    for i in range(operations):
        paths[f"/things{i}/{{id}}"] = {
            "get": {
                "operationId": f"getThing{i}",
                "summary": f"Get thing {i}",
                "description": f"Returns thing number {i}. " + "Lorem ipsum dolor sit amet. " * 12,
                "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "ok"}},
            }
        }
    return json.dumps({"openapi": "3.0.3", "info": {"title": "Big", "version": "1"}, "paths": paths})


def test_a_large_document_gets_conditions_that_say_what_to_do(
    api: Api, cluster: ControlPlane, start_operator: Callable[..., RunningOperator], tmp_path: Path
) -> None:
    start_operator()
    document = large_openapi(1550)
    assert 900_000 < len(document) < 1_000_000
    objs = manifests(api.namespace)
    objs["catalog"]["data"] = {"openapi.json": document}
    objs["connector"]["spec"]["expose"] = {}
    for key in ("creds", "llm", "connector", "agent"):
        api.must_apply(objs[key])
    missing = wait_for("CatalogMissing", condition_reason(api, "bot", "CatalogMissing"))
    assert "--server-side" in missing["message"], missing
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(objs["catalog"]))
    refused = kubectl(cluster, api.namespace, "apply", "-f", str(path), check=False)
    assert "Too long" in refused, refused
    began = time.monotonic()
    kubectl(cluster, api.namespace, "apply", "--server-side", "-f", str(path))
    too_large = wait_for("BundleTooLarge", condition_reason(api, "bot", "BundleTooLarge"))
    measured("large ConfigMap created -> BundleTooLarge", began)
    assert "expose.allow" in too_large["message"], too_large
    objs["connector"]["spec"]["expose"] = {"allow": ["getThing1", "getThing2"]}
    api.must_apply(objs["connector"])
    assert ready(api)["status"]["bundle"]["toolCount"] == 2
