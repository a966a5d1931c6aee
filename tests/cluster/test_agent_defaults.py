"""Issue 43 against the real control plane, the operator as the chart's ServiceAccount: every Agent pod has
requests and limits (Burstable, never BestEffort), a component with several pods gets a PodDisruptionBudget
the API server's eviction honours, and a Connector at a cloud metadata address is refused unless allowed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.cluster.operator_harness import Api, RunningOperator, apply_all, manifests, ready, wait_for


def _pods(api: Api, component: str) -> list[dict[str, Any]]:
    return api.list("pods", f"agentengine.io/agent=bot,agentengine.io/component={component}")


def _evict(api: Api, pod: str) -> int:
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": api.namespace},
    }
    return api.http.post(api.path("pods", pod, sub="eviction"), json=body).status_code


def test_pods_are_burstable_and_several_pods_get_a_budget_evictions_honour(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator()
    objs = manifests(api.namespace)
    objs["agent"]["spec"]["components"] = {"aer": {"replicas": 2}}
    apply_all(api, objs)
    ready(api)

    # The API server computes each pod's QoS class when it admits it: before issue 43 both were BestEffort.
    for component in ("aer", "tool"):
        pods = wait_for(f"{component} pods", lambda c=component: _pods(api, c) or None)
        assert {p["status"]["qosClass"] for p in pods} == {"Burstable"}, component
        resources = pods[0]["spec"]["containers"][0]["resources"]
        assert set(resources["requests"]) >= {"cpu", "memory"} and set(resources["limits"]) >= {
            "cpu",
            "memory",
        }
        spread = pods[0]["spec"]["topologySpreadConstraints"]
        assert spread[0]["topologyKey"] == "kubernetes.io/hostname"
        assert spread[0]["whenUnsatisfiable"] == "ScheduleAnyway"

    budget = api.get("poddisruptionbudgets", "bot-aer")
    assert budget is not None and budget["spec"]["maxUnavailable"] == 1
    assert budget["metadata"]["ownerReferences"][0]["kind"] == "Agent"
    assert api.get("poddisruptionbudgets", "bot-tool") is None  # one replica: no budget

    # Settled: exactly the two AER pods, both Ready and none going (a rollout's older pod is not counted by
    # the budget, and an unhealthy pod may always be evicted), and the budget allowing one disruption.
    def settled() -> bool:
        status = (api.get("poddisruptionbudgets", "bot-aer") or {}).get("status") or {}
        pods = _pods(api, "aer")
        ready = [
            p
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (p.get("status") or {}).get("conditions", [])
            )
        ]
        return (
            len(pods) == len(ready) == 2
            and status.get("currentHealthy") == 2
            and status.get("disruptionsAllowed") == 1
        )

    wait_for("two Ready AER pods the budget counts", settled)
    # The budget is the disruption controller's: it allows one of the two pods to go (disruptionsAllowed 1
    # above, 2 without a budget) and an eviction goes through it. Whether a second eviction is refused
    # depends on timing here: a KWOK replacement is Ready at once, and then the budget rightly allows it.
    assert _evict(api, _pods(api, "aer")[0]["metadata"]["name"]) == 201

    # A hand-deleted budget comes back (its watch); back to one replica, it goes.
    start = time.monotonic()
    api.delete("poddisruptionbudgets", "bot-aer")
    wait_for(
        "the budget recreated",
        lambda: (
            (b := api.get("poddisruptionbudgets", "bot-aer")) is not None
            and b["metadata"]["uid"] != budget["metadata"]["uid"]
        ),
    )
    recreated = time.monotonic() - start
    objs["agent"]["spec"]["components"] = {"aer": {"replicas": 1}}
    start = time.monotonic()
    api.must_apply(objs["agent"])
    wait_for("the budget deleted", lambda: api.get("poddisruptionbudgets", "bot-aer") is None)
    print(f"budget recreated in {recreated:.2f} s, deleted in {time.monotonic() - start:.2f} s")


def _metadata_connector(api: Api) -> dict[str, Any]:
    objs = manifests(api.namespace)
    objs["connector"]["spec"]["source"]["baseUrl"] = "http://169.254.169.254/latest"
    apply_all(api, objs)
    return objs


def test_a_connector_at_the_metadata_address_is_refused_and_allowed_only_by_the_platform(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    operator = start_operator()
    start = time.monotonic()
    _metadata_connector(api)
    bundle = wait_for(
        "BundleReady False",
        lambda: (c := api.condition("bot", "BundleReady")).get("reason") == "BaseUrlForbidden" and c,
    )
    refused = time.monotonic() - start
    assert "spec.source.baseUrl" in bundle["message"] and "169.254.0.0/16" in bundle["message"]
    connector = api.get("connectors", "petstore") or {}
    (ready_cond,) = [c for c in connector["status"]["conditions"] if c["type"] == "Ready"]
    assert ready_cond["reason"] == "BaseUrlForbidden"
    assert api.get("deployments", "bot-tool") is None  # nothing applied
    operator.process.stop()

    # The platform allows it: the Tool Pod may reach that address, and only it, on port 80.
    start_operator(extra_env={"AGENT_OPERATOR_ALLOW_METADATA_ADDRESSES": "true"})
    ready(api)
    deployment = api.get("deployments", "bot-tool") or {}
    digest = deployment["spec"]["template"]["metadata"]["labels"]["agentengine.io/network-policy"]
    policy = api.get("networkpolicies", f"agent-engine-tool-{digest}") or {}
    assert {
        "to": [{"ipBlock": {"cidr": "169.254.169.254/32"}}],
        "ports": [{"protocol": "TCP", "port": 80}],
    } in (policy["spec"]["egress"])
    print(f"BaseUrlForbidden in {refused:.2f} s")
