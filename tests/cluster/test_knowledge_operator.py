"""`spec.knowledge` (issue 37) through the real API server and operator: a ConfigMap or Secret that does not
exist gives a False Ready and a Warning Event naming the entry and the fix, and nothing is applied (no Tool
Pod left in ContainerCreating); once it is created, the metadata watch reconciles the Agent within seconds
(well before the resync) and the Tool Pod mounts it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.cluster.operator_harness import Api, RunningOperator, apply_all, manifests, wait_for


def _agent(api: Api, knowledge: list[dict[str, str]]) -> dict[str, Any]:
    body = manifests(api.namespace)["agent"]
    body["metadata"]["name"] = "kb-bot"
    body["spec"]["knowledge"] = knowledge
    return body


def _refused(api: Api, named: str) -> dict[str, Any]:
    return wait_for(
        f"Ready=False KnowledgeMissing naming {named}",
        lambda: (
            (c := api.condition("kb-bot")).get("reason") == "KnowledgeMissing" and named in c["message"] and c
        ),
    )


def _tool_volumes(api: Api) -> set[str]:
    deployment = api.get("deployments", "kb-bot-tool") or {}
    volumes = ((deployment.get("spec") or {}).get("template") or {}).get("spec", {}).get("volumes", [])
    return {v["name"] for v in volumes}


def test_a_missing_knowledge_source_is_named_and_its_creation_heals_the_agent(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator(resync_seconds=300)  # the heal below must come from the watch, not a resync
    apply_all(api, manifests(api.namespace))
    api.must_apply(_agent(api, [{"name": "handbook", "configMapName": "team-handbook"}]))

    refused = _refused(api, "ConfigMap 'team-handbook'")
    assert refused["status"] == "False"
    assert "spec.knowledge[0] (handbook)" in refused["message"]
    assert "kubectl create configmap team-handbook" in refused["message"]
    event = wait_for(
        "the Warning Event",
        lambda: next((e for e in api.events("kb-bot") if e["reason"] == "KnowledgeMissing"), None),
    )
    assert event["type"] == "Warning" and "team-handbook" in event["message"]
    assert api.get("deployments", "kb-bot-tool") is None  # nothing applied: no pod waiting on a volume

    api.must_apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "team-handbook", "namespace": api.namespace},
            "data": {"faq.md": "# FAQ\n\nThe desk opens at eight."},
        }
    )
    wait_for(
        "the Tool Pod mounting the handbook", lambda: "knowledge-handbook" in _tool_volumes(api), timeout=30
    )
    wait_for(
        "the condition past KnowledgeMissing",
        lambda: api.condition("kb-bot").get("reason") != "KnowledgeMissing",
    )

    # A Secret entry the same way; the ConfigMap one stays satisfied.
    api.must_apply(
        _agent(
            api,
            [
                {"name": "handbook", "configMapName": "team-handbook"},
                {"name": "private", "secretName": "kb-private"},
            ],
        )
    )
    refused = _refused(api, "Secret 'kb-private'")
    assert "spec.knowledge[1] (private)" in refused["message"]
    assert "kubectl create secret generic kb-private" in refused["message"]
    assert "knowledge-private" not in _tool_volumes(api)
