"""Issue 41: an Agent whose spec changed is Ready only once its replaced pods are gone, against the real
control plane's Deployment controller. A finalizer keeps the old AER pod terminating for as long as the test
likes (KWOK deletes a pod's object, and the API server keeps it while a finalizer is on it), which is what a
slow drain does on a real node: before the fix the Agent read Ready while that pod still took requests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.cluster.operator_harness import Api, RunningOperator, apply_all, manifests, ready, wait_for

HOLD = "agentengine.io/test-hold"
AER = "agentengine.io/agent=bot,agentengine.io/component=aer"


def _patch_finalizers(api: Api, pod: str, finalizers: list[str]) -> None:
    response = api.http.patch(
        api.path("pods", pod),
        content=json.dumps({"metadata": {"finalizers": finalizers}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert response.is_success, response.text


def _terminating(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if p["metadata"].get("deletionTimestamp")]


def test_ready_waits_for_the_replaced_aer_pod_to_be_gone(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator()
    objs = manifests(api.namespace)
    apply_all(api, objs)
    ready(api)
    old = wait_for("one AER pod", lambda: (pods := api.list("pods", AER)) and len(pods) == 1 and pods[0])
    old_name = old["metadata"]["name"]
    _patch_finalizers(api, old_name, [HOLD])
    try:
        objs["agent"]["spec"]["components"] = {"aer": {"env": [{"name": "GREETING", "value": "second"}]}}
        api.must_apply(objs["agent"])

        # The new pod is available and the old one terminating, held by the finalizer: not Ready yet.
        def replaced_and_terminating() -> bool:
            pods = api.list("pods", AER)
            going = _terminating(pods)
            return len(pods) == 2 and [p["metadata"]["name"] for p in going] == [old_name]

        wait_for("the old AER pod terminating beside its replacement", replaced_and_terminating)
        aer = wait_for(
            "AERReady naming the replaced pod",
            lambda: (
                (c := api.condition("bot", "AERReady")).get("message", "").endswith("still running") and c
            ),
        )
        assert aer["status"] == "False" and aer["reason"] == "RolloutInProgress"
        assert api.condition("bot")["status"] == "False"
        generation = api.get("agents", "bot")["metadata"]["generation"]
        assert aer["observedGeneration"] == generation
    finally:
        _patch_finalizers(api, old_name, [])

    wait_for(
        "the old AER pod gone", lambda: [p["metadata"]["name"] for p in api.list("pods", AER)] != [old_name]
    )
    ready(api)
    pods = api.list("pods", AER)
    assert old_name not in {p["metadata"]["name"] for p in pods} and not _terminating(pods)
