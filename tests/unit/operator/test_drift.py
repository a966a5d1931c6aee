"""Drift: rendered objects against what a real API server stored for them, untouched and hand-edited.

tests/unit/operator/live/memory_agent.json holds the memory golden Agent's children as rendered and as the
cluster tier's kube-apiserver stored them (`python -m tests.cluster.record_live` records them again).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from agent_operator.drift import drift, fingerprint, generation_key, projection

RECORDED: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parent / "live" / "memory_agent.json").read_text()
)
RENDERED = {name: pair["rendered"] for name, pair in RECORDED.items()}
LIVE = {name: pair["stored"] for name, pair in RECORDED.items()}


def _live(name: str) -> dict[str, Any]:
    return copy.deepcopy(LIVE[name])


def _container(body: dict[str, Any]) -> dict[str, Any]:
    return body["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_what_the_api_server_stored_is_no_drift(name: str) -> None:
    assert drift(RENDERED[name], projection(LIVE[name])) == []


def _edit_image(body: dict[str, Any]) -> None:
    _container(body)["image"] = "attacker.example.com/evil:1"


def _add_env(body: dict[str, Any]) -> None:
    _container(body)["env"].append({"name": "HTTPS_PROXY", "value": "http://attacker.example.com:3128"})


def _change_env(body: dict[str, Any]) -> None:
    _container(body)["env"][0]["value"] = "other"


def _drop_env(body: dict[str, Any]) -> None:
    _container(body)["env"].pop()


def _scale(body: dict[str, Any]) -> None:
    body["spec"]["replicas"] = 0


def _host_network(body: dict[str, Any]) -> None:
    body["spec"]["template"]["spec"]["hostNetwork"] = True


def _init_container(body: dict[str, Any]) -> None:
    body["spec"]["template"]["spec"]["initContainers"] = [{"name": "x", "image": "attacker.example.com/x"}]


def _drop_label(body: dict[str, Any]) -> None:
    del body["metadata"]["labels"]["agentengine.io/agent"]


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (_edit_image, "spec.template.spec.containers[0].image"),
        (_add_env, "spec.template.spec.containers[0].env"),
        (_change_env, "spec.template.spec.containers[0].env[0].value"),
        (_drop_env, "spec.template.spec.containers[0].env"),
        (_scale, "spec.replicas"),
        (_host_network, "spec.template.spec.hostNetwork"),
        (_init_container, "spec.template.spec.initContainers"),
        (_drop_label, "metadata.labels.agentengine.io/agent"),
    ],
)
def test_hand_edits_to_a_deployment_are_drift(edit: Any, path: str) -> None:
    live = _live("Deployment/support-bot-tool")
    edit(live)
    assert drift(RENDERED["Deployment/support-bot-tool"], projection(live)) == [path]


def test_an_opened_network_policy_is_drift() -> None:
    live = _live("NetworkPolicy/support-bot-tool")
    live["spec"]["egress"] = [{}]
    assert drift(RENDERED["NetworkPolicy/support-bot-tool"], projection(live)) == ["spec.egress"]


def test_status_others_annotations_and_labels_are_not_drift() -> None:
    live = _live("Deployment/support-bot-aer")
    before = fingerprint(live)
    live["status"] = {"replicas": 2, "readyReplicas": 1}
    live["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "7"
    live["metadata"]["labels"]["team"] = "support"
    live["metadata"]["resourceVersion"] = "999"
    assert drift(RENDERED["Deployment/support-bot-aer"], projection(live)) == []
    assert fingerprint(live) != before  # a label of someone else's is a new state (checked, then kept)
    del live["metadata"]["labels"]["team"]
    assert fingerprint(live) == before


def test_quantities_compare_by_value() -> None:
    rendered = copy.deepcopy(RENDERED["Deployment/support-bot-aer"])
    live = _live("Deployment/support-bot-aer")
    _container(rendered)["resources"]["requests"] = {"cpu": "1000m", "memory": "1024Mi"}
    _container(live)["resources"]["requests"] = {"cpu": "1", "memory": "1Gi"}
    assert drift(rendered, projection(live)) == []
    _container(live)["resources"]["requests"]["cpu"] = "2"
    assert drift(rendered, projection(live)) == ["spec.template.spec.containers[0].resources.requests.cpu"]


def test_a_deployments_status_updates_keep_its_generation_key_a_hand_edit_does_not() -> None:
    live = _live("Deployment/support-bot-aer")
    key = generation_key(live)
    live["status"] = {"replicas": 2, "readyReplicas": 1}
    live["metadata"]["resourceVersion"] = "999"
    assert generation_key(live) == key  # status churn: nothing to check again
    edited = _live("Deployment/support-bot-aer")
    edited["metadata"]["generation"] = (edited["metadata"].get("generation") or 1) + 1  # the server's mark
    assert generation_key(edited) != key
    relabelled = _live("Deployment/support-bot-aer")
    relabelled["metadata"]["labels"]["agentengine.io/component"] = "tool"  # no generation bump for labels
    assert generation_key(relabelled) != key
