"""The objects a namespace's Agents share, against the real control plane with the operator running.

What is the same for every Agent of a namespace is written once, not once per Agent: one ServiceAccount per
component (`agent-engine-aer|tool|memory`), the default-deny NetworkPolicy, each component's NetworkPolicy
(named by the digest of its rules, selecting pods by the digest they carry as a label) and the bundle
ConfigMaps (named by the bundle's digest). They carry no ownerReference: the operator deletes one when no
Agent renders it and no ReplicaSet with pods still refers to it. Each Agent keeps its own Deployments,
Services and runtime token Secret (and Memory's NetworkPolicy), owned by it as before.

The operator runs as a process with the chart's identity (tests/cluster/operator_harness.py); the control
plane's garbage collector removes an Agent's Deployments, ReplicaSets and pods through their ownerReferences.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from tests.cluster.operator_harness import (
    Api,
    RunningOperator,
    apply_all,
    manifests,
    mounted_bundles,
    openapi_text,
    ready,
    wait_for,
)
from tests.cluster.test_operator import DEFAULT_DENY, SHARED, SHARED_KINDS, is_shared, policy_of

AGENTS = ("bot", "bot2")
COMPONENTS = ("aer", "tool")
# The Kind the operator logs for each shared kind ("shared object deleted": "<Kind>/<name>").
KINDS = {"configmaps": "ConfigMap", "serviceaccounts": "ServiceAccount", "networkpolicies": "NetworkPolicy"}

Key = tuple[str, str]  # (plural, name)


def agent_manifest(api: Api, name: str, **spec: Any) -> dict[str, Any]:
    body = manifests(api.namespace)["agent"]
    body["metadata"]["name"] = name
    body["spec"].update(spec)
    return body


def two_agents(api: Api) -> dict[str, dict[str, Any]]:
    """`bot` and `bot2`: the same Connector, the same spec but for the name; both Ready."""
    apply_all(api, manifests(api.namespace))
    api.must_apply(agent_manifest(api, "bot2"))
    return {name: ready(api, name) for name in AGENTS}


def shared(api: Api) -> dict[Key, dict[str, Any]]:
    """Every object of the namespace labelled as shared."""
    return {(kind, o["metadata"]["name"]): o for kind in SHARED_KINDS for o in api.list(kind, SHARED)}


def uids(objects: dict[Key, dict[str, Any]]) -> dict[Key, str]:
    return {key: body["metadata"]["uid"] for key, body in objects.items()}


def held_by_pods(api: Api) -> set[Key]:
    """The shared objects that ReplicaSets with replicas (pods running or on their way) refer to: their
    ServiceAccount, the NetworkPolicies that select their pods, the ConfigMaps they mount."""
    held: set[Key] = set()
    for rs in api.list("replicasets"):
        if not (rs["spec"].get("replicas") or (rs.get("status") or {}).get("replicas")):
            continue
        template = rs["spec"]["template"]
        labels = template["metadata"].get("labels") or {}
        pod = template["spec"]
        held.add(("serviceaccounts", pod.get("serviceAccountName", "default")))
        if "agentengine.io/agent" in labels:
            held.add(("networkpolicies", DEFAULT_DENY))
        if digest := labels.get("agentengine.io/network-policy"):
            held.add(("networkpolicies", f"agent-engine-{labels['agentengine.io/component']}-{digest}"))
        for volume in pod.get("volumes") or []:
            for source in (volume.get("projected") or {}).get("sources") or []:
                if "configMap" in source:
                    held.add(("configmaps", source["configMap"]["name"]))
    return held


def gone_but_never_early(api: Api, keys: set[Key]) -> Callable[[], bool]:
    """A poll: True once every object of `keys` is gone. Each round first looks which are gone, then which
    objects ReplicaSets with pods still refer to: one gone while still referred to was deleted too early
    (a ReplicaSet of an Agent being deleted only ever loses replicas, so the order makes this exact)."""

    def check() -> bool:
        gone = {key for key in keys if api.get(*key) is None}
        if gone:
            early = gone & held_by_pods(api)
            assert not early, f"deleted while pods still use them: {sorted(early)}"
        return gone == keys

    return check


def recreated(api: Api, kind: str, name: str, uid: str) -> Callable[[], dict[str, Any] | None]:
    """A poll: the object `kind/name` once it exists again as another object than `uid`."""

    def check() -> dict[str, Any] | None:
        body = api.get(kind, name)
        return body if body is not None and body["metadata"]["uid"] != uid else None

    return check


def quota_used(api: Api, name: str) -> dict[str, str]:
    return ((api.get("resourcequotas", name) or {}).get("status") or {}).get("used") or {}


def deleted_by_operator(operator: RunningOperator) -> set[Key]:
    by_kind = {kind: plural for plural, kind in KINDS.items()}
    out = set()
    for record in operator.log_lines():
        if record.get("message") == "shared object deleted":
            kind, name = record["object"].split("/", 1)
            out.add((by_kind[kind], name))
    return out


def test_two_agents_with_the_same_connector_share_one_set_and_keep_their_own_children(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator()
    agents = two_agents(api)

    # One bundle ConfigMap for both, mounted by all four Deployments.
    bundles = {name: agent["status"]["bundle"]["configMaps"] for name, agent in agents.items()}
    assert len(bundles["bot"]) == 1 and bundles["bot"] == bundles["bot2"], bundles
    (bundle,) = bundles["bot"]
    assert bundle.startswith("agent-engine-bundle-"), bundle
    for name in AGENTS:
        for component in COMPONENTS:
            assert mounted_bundles(api, f"{name}-{component}") == [bundle]

    # One ServiceAccount per component and one policy per component for both, plus one default-deny.
    policies = {c: policy_of(api, f"bot-{c}") for c in COMPONENTS}
    for component in COMPONENTS:
        assert policy_of(api, f"bot2-{component}") == policies[component]
        for name in AGENTS:
            pod_spec = (api.get("deployments", f"{name}-{component}") or {})["spec"]["template"]["spec"]
            assert pod_spec["serviceAccountName"] == f"agent-engine-{component}"
    objects = shared(api)
    assert set(objects) == {
        ("configmaps", bundle),
        ("serviceaccounts", "agent-engine-aer"),
        ("serviceaccounts", "agent-engine-tool"),
        ("networkpolicies", DEFAULT_DENY),
        ("networkpolicies", policies["aer"]),
        ("networkpolicies", policies["tool"]),
    }, sorted(objects)
    assert all(is_shared(body) for body in objects.values()), objects
    # ...and nothing per Agent besides: the namespace holds no other account, policy or bundle.
    made = "app.kubernetes.io/managed-by=agent-engine-operator"
    accounts = {o["metadata"]["name"] for o in api.list("serviceaccounts", made)}
    assert accounts == {"agent-engine-aer", "agent-engine-tool"}, accounts
    assert not [o for o in api.list("serviceaccounts") if o["metadata"]["name"].startswith(AGENTS)]
    assert len(api.list("networkpolicies")) == 3
    config_maps = {o["metadata"]["name"] for o in api.list("configmaps")}
    assert config_maps - {"petstore-openapi", "kube-root-ca.crt"} == {bundle}, config_maps

    # The shared policies select both Agents' pods of their component, and only those.
    deny = objects[("networkpolicies", DEFAULT_DENY)]["spec"]
    assert deny["podSelector"] == {
        "matchExpressions": [{"key": "agentengine.io/agent", "operator": "Exists"}]
    }
    assert sorted(deny["policyTypes"]) == ["Egress", "Ingress"] and not deny.get("ingress")
    for component in COMPONENTS:
        selector = objects[("networkpolicies", policies[component])]["spec"]["podSelector"]["matchLabels"]
        for name in AGENTS:
            for other in COMPONENTS:
                body = api.get("deployments", f"{name}-{other}") or {}
                labels = body["spec"]["template"]["metadata"]["labels"]
                selected = all(labels.get(k) == v for k, v in selector.items())
                assert selected == (other == component), (component, name, other, selector, labels)

    # Each Agent's own children: owned by it, labelled with it, one token each.
    tokens = set()
    for name, agent in agents.items():
        for kind, child in (
            *((kind, f"{name}-{c}") for kind in ("deployments", "services") for c in COMPONENTS),
            ("secrets", f"{name}-runtime-token"),
        ):
            body = api.get(kind, child)
            assert body is not None, f"{kind}/{child} missing"
            assert [o["uid"] for o in body["metadata"]["ownerReferences"]] == [agent["metadata"]["uid"]]
            assert body["metadata"]["labels"]["agentengine.io/agent"] == name
        tokens.add((api.get("secrets", f"{name}-runtime-token") or {})["data"]["token"])
    assert len(tokens) == 2

    # An Agent whose rules differ (Memory on: its Tool Pod may reach a Memory server) gets policies of its
    # own, and shares what is alike: the bundle, the accounts, the default-deny.
    api.must_apply(agent_manifest(api, "solo", components={"memory": {"enabled": True}}))
    solo = ready(api, "solo")
    assert solo["status"]["bundle"]["configMaps"] == [bundle]
    solo_policies = {c: policy_of(api, f"solo-{c}") for c in COMPONENTS}
    assert all(solo_policies[c] != policies[c] for c in COMPONENTS), (solo_policies, policies)
    after = shared(api)
    added = set(after) - set(objects)
    assert set(objects) <= set(after), sorted(after)
    assert added == {
        ("serviceaccounts", "agent-engine-memory"),
        *(("networkpolicies", solo_policies[c]) for c in COMPONENTS),
    }, sorted(added)
    assert uids({k: after[k] for k in objects}) == uids(objects)  # the others' objects untouched
    # Memory's policy is solo's own and admits only solo's pods, and the OE's (issue 37: it forwards the
    # knowledge documents clients post), which a namespace selector confines to the OE's namespace.
    memory = api.get("networkpolicies", "solo-memory") or {}
    assert [o["uid"] for o in memory["metadata"]["ownerReferences"]] == [solo["metadata"]["uid"]]
    callers = memory["spec"]["ingress"][0]["from"]
    pods_here = [p for p in callers if "namespaceSelector" not in p]
    assert pods_here and all(
        p["podSelector"]["matchLabels"]["agentengine.io/agent"] == "solo" for p in pods_here
    )
    (oe,) = [p for p in callers if "namespaceSelector" in p]
    assert oe["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "oe", oe


def test_shared_objects_stay_while_one_agent_uses_them_and_go_with_the_last(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    operator = start_operator()
    two_agents(api)
    before = shared(api)
    assert len(before) == 6, sorted(before)

    # bot2 goes: its own children with it, the shared objects stay (bot still uses every one of them).
    api.delete("agents", "bot2")
    wait_for("bot2 gone", lambda: api.get("agents", "bot2") is None)
    for kind in ("deployments", "replicasets", "services", "secrets"):
        wait_for(
            f"bot2's {kind} gone",
            lambda kind=kind: not api.list(kind, "agentengine.io/agent=bot2"),
            timeout=90,
        )
    wait_for("bot2's pods gone", lambda: not api.list("pods", "agentengine.io/agent=bot2"), timeout=90)
    time.sleep(5)  # room for a collection the operator should not make (it looks 1, 2, 4 s after a deletion)
    assert uids(shared(api)) == uids(before)
    assert deleted_by_operator(operator) == set()
    ready(api, "bot")

    # The last one goes: every shared object is deleted by the operator, none while pods still use it.
    began = time.monotonic()
    api.delete("agents", "bot")
    wait_for("bot gone", lambda: api.get("agents", "bot") is None)
    wait_for("every shared object deleted", gone_but_never_early(api, set(before)), timeout=90)
    print(f"measured: last Agent deleted -> shared objects gone: {time.monotonic() - began:.2f}s")
    assert shared(api) == {}
    assert deleted_by_operator(operator) == set(before)


def test_shared_objects_stay_while_pods_of_a_deleted_agent_still_run(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    """Pods outlive their Agent (`kubectl delete --cascade=orphan`): what they use stays until they go."""
    operator = start_operator()
    apply_all(api, manifests(api.namespace))
    ready(api)
    before = shared(api)
    assert len(before) == 6, sorted(before)

    api.http.delete(api.path("agents", "bot"), params={"propagationPolicy": "Orphan"})
    wait_for("bot gone", lambda: api.get("agents", "bot") is None)
    wait_for(
        "its Deployments orphaned",
        lambda: all(not d["metadata"].get("ownerReferences") for d in api.list("deployments")),
    )
    assert set(before) <= held_by_pods(api)
    time.sleep(8)  # the operator looks again 1, 2, 4 s after the deletion: every object is still held
    assert uids(shared(api)) == uids(before)
    assert deleted_by_operator(operator) == set()

    for deployment in api.list("deployments", "agentengine.io/agent=bot"):
        api.delete("deployments", deployment["metadata"]["name"])
    wait_for("every shared object deleted", gone_but_never_early(api, set(before)), timeout=90)
    assert deleted_by_operator(operator) == set(before)


def test_a_deleted_shared_account_and_an_edited_shared_policy_come_back(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    operator = start_operator()
    two_agents(api)

    account = api.get("serviceaccounts", "agent-engine-tool") or {}
    began = time.monotonic()
    api.delete("serviceaccounts", "agent-engine-tool")
    back = wait_for(
        "the shared ServiceAccount recreated",
        recreated(api, "serviceaccounts", "agent-engine-tool", account["metadata"]["uid"]),
    )
    print(f"measured: shared ServiceAccount deleted -> recreated: {time.monotonic() - began:.2f}s")
    assert is_shared(back) and back.get("automountServiceAccountToken") is False, back

    name = policy_of(api, "bot-aer")
    spec = (api.get("networkpolicies", name) or {})["spec"]
    began = time.monotonic()
    opened = api.http.patch(
        api.path("networkpolicies", name),
        content=json.dumps({"spec": {"egress": [{}], "ingress": [{}]}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert opened.is_success, opened.text
    assert opened.json()["spec"] != spec
    wait_for(
        "the shared NetworkPolicy reverted", lambda: (api.get("networkpolicies", name) or {})["spec"] == spec
    )
    print(f"measured: shared NetworkPolicy opened -> reverted: {time.monotonic() - began:.2f}s")

    deny = api.get("networkpolicies", DEFAULT_DENY) or {}
    api.delete("networkpolicies", DEFAULT_DENY)
    restored = wait_for(
        "the default-deny recreated", recreated(api, "networkpolicies", DEFAULT_DENY, deny["metadata"]["uid"])
    )
    assert restored["spec"] == deny["spec"] and is_shared(restored)

    # Two Agents use each of them: repaired once, then no fight between their reconciles.
    for name in AGENTS:
        ready(api, name)
    time.sleep(2)
    writes = operator.writes()
    time.sleep(3)
    assert operator.writes() == writes, operator.process.output()[-3000:]


def test_a_catalog_change_moves_both_agents_to_one_new_bundle_and_the_old_goes_once_unmounted(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    operator = start_operator()
    agents = two_agents(api)
    (old,) = agents["bot"]["status"]["bundle"]["configMaps"]
    others = {k: v for k, v in shared(api).items() if k[0] != "configmaps"}

    # Hold the old pods: a quota of exactly the pods there are keeps the rollouts' new pods out (surge 1,
    # unavailable 0), so the old ReplicaSets keep their pods, which mount the old bundle.
    pods = len(api.list("pods", "app.kubernetes.io/managed-by=agent-engine-operator"))
    assert pods == 4
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "hold-pods", "namespace": api.namespace},
        "spec": {"hard": {"pods": str(pods)}},
    }
    created = api.http.post(api.path("resourcequotas"), json=quota)
    assert created.is_success, created.text
    wait_for("the quota counted", lambda: quota_used(api, "hold-pods").get("pods") == str(pods))

    api.must_apply(manifests(api.namespace, catalog=openapi_text(description="v2"))["catalog"])

    def moved() -> list[str] | None:
        names = [(api.get("agents", n) or {})["status"]["bundle"]["configMaps"] for n in AGENTS]
        return names[0] if names[0] != [old] and names[0] == names[1] else None

    new = wait_for("both Agents on a new bundle", moved)
    assert len(new) == 1 and new[0].startswith("agent-engine-bundle-") and new[0] != old, new
    for name in AGENTS:
        for component in COMPONENTS:
            wait_for(
                f"{name}-{component} mounting the new bundle",
                lambda d=f"{name}-{component}": mounted_bundles(api, d) == new,
            )
    wait_for("the old pods held by old ReplicaSets", lambda: ("configmaps", old) in held_by_pods(api))
    time.sleep(8)  # the operator looks again 1, 2, 4 s later and on every Deployment change
    assert api.get("configmaps", old) is not None, "deleted while old pods still mount it"
    assert ("configmaps", old) in held_by_pods(api)

    # Released: the rollouts finish, the old ReplicaSets lose their pods, the old bundle goes.
    began = time.monotonic()
    api.http.delete(api.path("resourcequotas", "hold-pods"))
    wait_for("the old bundle deleted", gone_but_never_early(api, {("configmaps", old)}), timeout=90)
    print(f"measured: old pods released -> old bundle gone: {time.monotonic() - began:.2f}s")
    for name in AGENTS:
        ready(api, name)
    assert ("configmaps", old) in deleted_by_operator(operator)
    after = shared(api)
    assert {k for k in after if k[0] == "configmaps"} == {("configmaps", new[0])}
    # A bundle change leaves the other shared objects alone.
    assert uids({k: v for k, v in after.items() if k[0] != "configmaps"}) == uids(others)
