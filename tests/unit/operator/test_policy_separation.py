"""Per-Agent trust separation, proven on the rendered NetworkPolicies of two Agents sharing a namespace.

The policies are evaluated with Kubernetes' semantics (a pod selected by any policy of a type is isolated
for that type; a connection needs an egress allow at the source and an ingress allow at the destination),
treating an ipBlock of 0.0.0.0/0 as matching every pod, which only ever allows more. The real node's
journey (tests/cluster/test_real_node.py) checks the same on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from agent_operator.reconcile import plan_agent
from agent_operator.settings import RenderSettings
from agent_runtime import contract
from tests.unit.operator.specimens import agent_body, inputs

SETTINGS = RenderSettings()
NAMESPACE = "team-a"
PORTS = {"aer": 8001, "tool": 8002, "memory": 8081, "oe": 8080}


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict[str, str]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
        if operator == "In" and labels.get(key) not in expression["values"]:
            return False
        if operator == "NotIn" and labels.get(key) in expression["values"]:
            return False
    return True


NAMESPACE_LABELS = {ns: {"kubernetes.io/metadata.name": ns} for ns in (NAMESPACE, "agent-engine")}


def _peer_matches(peer: dict[str, Any], pod: Pod, policy_ns: str) -> bool:
    if "ipBlock" in peer:
        return True
    if "namespaceSelector" in peer:
        if not _selects(peer["namespaceSelector"], NAMESPACE_LABELS[pod.namespace]):
            return False
    elif pod.namespace != policy_ns:
        return False
    return _selects(peer.get("podSelector") or {}, pod.labels)


def _rule_allows(rule: dict[str, Any], peers_key: str, pod: Pod, port: int, policy_ns: str) -> bool:
    ports = rule.get("ports")
    if ports and not any(p.get("port") == port and p.get("protocol", "TCP") == "TCP" for p in ports):
        return False
    peers = rule.get(peers_key)
    return not peers or any(_peer_matches(peer, pod, policy_ns) for peer in peers)


def _allowed(policies: list[dict[str, Any]], src: Pod, dst: Pod, port: int) -> bool:
    def side(pod: Pod, kind: str, peers_key: str, other: Pod) -> bool:
        relevant = [
            p
            for p in policies
            if p["metadata"]["namespace"] == pod.namespace
            and kind in p["spec"]["policyTypes"]
            and _selects(p["spec"]["podSelector"], pod.labels)
        ]
        if not relevant:
            return True  # not isolated
        return any(
            _rule_allows(rule, peers_key, other, port, p["metadata"]["namespace"])
            for p in relevant
            for rule in p["spec"].get(kind.lower()) or []
        )

    return side(src, "Egress", "to", dst) and side(dst, "Ingress", "from", src)


def _namespace_of_two_agents() -> tuple[list[dict[str, Any]], dict[str, Pod]]:
    policies: dict[str, dict[str, Any]] = {}
    pods: dict[str, Pod] = {}
    for name in ("bot-a", "bot-b"):
        agent = agent_body(name=name, components={"memory": {"enabled": True}})
        for desired in plan_agent(inputs(agent=agent), settings=SETTINGS).objects:
            manifest = desired.manifest
            if manifest["kind"] == "NetworkPolicy":
                policies[manifest["metadata"]["name"]] = manifest  # shared ones once, as in the cluster
            if manifest["kind"] == "Deployment":
                component = manifest["metadata"]["labels"]["agentengine.io/component"]
                pods[f"{name}/{component}"] = Pod(
                    NAMESPACE, manifest["spec"]["template"]["metadata"]["labels"]
                )
    pods["oe"] = Pod("agent-engine", dict(SETTINGS.oe_pod_labels))
    return list(policies.values()), pods


def test_two_agents_share_the_namespace_policies_and_keep_their_own_memory_policy() -> None:
    policies, _ = _namespace_of_two_agents()
    names = sorted(p["metadata"]["name"] for p in policies)
    # default-deny, the AER's and the Tool Pod's (shared, by digest), and one Memory policy per Agent
    assert [n.rsplit("-", 1)[0] for n in names] == [
        "agent-engine-aer", "agent-engine-default", "agent-engine-tool", "bot-a", "bot-b"
    ]  # fmt: skip
    assert names[3:] == ["bot-a-memory", "bot-b-memory"]


@pytest.mark.parametrize("src_agent", ["bot-a", "bot-b"])
def test_no_component_of_one_agent_reaches_a_component_of_another(src_agent: str) -> None:
    policies, pods = _namespace_of_two_agents()
    dst_agent = "bot-b" if src_agent == "bot-a" else "bot-a"
    for src in ("aer", "tool", "memory"):
        for dst in ("aer", "tool", "memory"):
            allowed = _allowed(policies, pods[f"{src_agent}/{src}"], pods[f"{dst_agent}/{dst}"], PORTS[dst])
            assert not allowed, f"{src_agent}'s {src} reaches {dst_agent}'s {dst}"


def test_the_paths_of_the_trust_table_are_open_and_no_other() -> None:
    policies, pods = _namespace_of_two_agents()
    open_paths = {
        (src, dst)
        for src in ("oe", "bot-a/aer", "bot-a/tool", "bot-a/memory")
        for dst in ("oe", "bot-a/aer", "bot-a/tool", "bot-a/memory")
        if src != dst and _allowed(policies, pods[src], pods[dst], PORTS[dst.rsplit("/", 1)[-1]])
    }
    # The OE calls both runtimes and the Memory server (the knowledge documents, issue 37); the AER calls
    # the OE; Memory is reached by its own Agent's pods and the OE only.
    assert open_paths == {
        ("oe", "bot-a/aer"),
        ("oe", "bot-a/tool"),
        ("oe", "bot-a/memory"),
        ("bot-a/aer", "oe"),
        ("bot-a/aer", "bot-a/memory"),
        ("bot-a/tool", "bot-a/memory"),
    }
    assert contract.PORTS[contract.RunnerMode.OE] == PORTS["oe"]


def test_the_evaluator_would_see_a_breach() -> None:
    """The same evaluation on policies without the Memory ingress rule lets bot-b's AER in: the test above
    can fail."""
    policies, pods = _namespace_of_two_agents()
    opened = [
        p
        if p["metadata"]["name"] != "bot-a-memory"
        else {**p, "spec": {**p["spec"], "ingress": [{"ports": [{"protocol": "TCP", "port": 8081}]}]}}
        for p in policies
    ]
    assert _allowed(opened, pods["bot-b/aer"], pods["bot-a/memory"], PORTS["memory"])
    assert not _allowed(policies, pods["bot-b/aer"], pods["bot-a/memory"], PORTS["memory"])
