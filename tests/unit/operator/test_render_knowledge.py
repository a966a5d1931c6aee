"""`spec.knowledge` (issue 37): each ConfigMap or Secret of documents is mounted read-only into the Tool Pod
only, where a `knowledge` connector's `config.paths` finds it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_operator.inputs import AgentInputs, InputProblem, SecretMeta, agent_references
from agent_operator.reconcile import plan_agent
from agent_operator.render import KNOWLEDGE_DIR
from agent_operator.settings import RenderSettings
from tests.conftest import REPO_ROOT
from tests.unit.operator.specimens import agent_body, inputs


def _with_documents(body: dict[str, Any], *, config_map: bool = True, secret: bool = True) -> AgentInputs:
    """The specimen's inputs plus the knowledge ConfigMap and Secret (each left out when asked)."""
    base = inputs(body)
    config_maps = {**base.config_maps, **({"team-handbook": {"faq.md": "# FAQ"}} if config_map else {})}
    secrets = {
        **base.secrets,
        **({"kb": SecretMeta(resource_version="7", keys=frozenset({"a.md"}))} if secret else {}),
    }
    return replace(base, config_maps=config_maps, secrets=secrets)


KNOWLEDGE = [{"name": "handbook", "configMapName": "team-handbook"}, {"name": "private", "secretName": "kb"}]


def _pod(plan: Any, component: str) -> dict[str, Any]:
    (deployment,) = (
        d.manifest
        for d in plan.objects
        if d.manifest["kind"] == "Deployment"
        and d.manifest["spec"]["template"]["metadata"]["labels"].get("agentengine.io/component") == component
    )
    return dict(deployment["spec"]["template"]["spec"])


def test_knowledge_is_mounted_read_only_into_the_tool_pod_only() -> None:
    body = agent_body(
        knowledge=[
            {"name": "handbook", "configMapName": "team-handbook"},
            {"name": "private", "secretName": "kb"},
        ]
    )
    plan = plan_agent(_with_documents(body), settings=RenderSettings())
    tool = _pod(plan, "tool")
    volumes = {v["name"]: v for v in tool["volumes"]}
    assert volumes["knowledge-handbook"]["configMap"] == {"name": "team-handbook", "defaultMode": 0o444}
    assert volumes["knowledge-private"]["secret"] == {"secretName": "kb", "defaultMode": 0o440}
    mounts = {m["name"]: m for m in tool["containers"][0]["volumeMounts"]}
    assert mounts["knowledge-handbook"] == {
        "name": "knowledge-handbook",
        "mountPath": f"{KNOWLEDGE_DIR}/handbook",
        "readOnly": True,
    }
    assert mounts["knowledge-private"]["readOnly"] is True
    aer = _pod(plan, "aer")  # the agent's own code never gets the documents mounted
    assert not any(v["name"].startswith("knowledge-") for v in aer["volumes"])


@pytest.mark.parametrize(
    ("config_map", "secret", "named", "fix"),
    [
        (False, True, "ConfigMap 'team-handbook'", "kubectl create configmap team-handbook"),
        (True, False, "Secret 'kb'", "kubectl create secret generic kb"),
    ],
)
def test_a_missing_knowledge_source_is_refused_naming_the_entry_and_the_fix(
    config_map: bool, secret: bool, named: str, fix: str
) -> None:
    body = agent_body(knowledge=KNOWLEDGE)
    with pytest.raises(InputProblem) as refused:
        plan_agent(_with_documents(body, config_map=config_map, secret=secret), settings=RenderSettings())
    problem = refused.value
    assert problem.reason == "KnowledgeMissing" and problem.condition == "Ready"
    assert named in problem.message and fix in problem.message
    entry = "spec.knowledge[0] (handbook)" if not config_map else "spec.knowledge[1] (private)"
    assert entry in problem.message


def test_knowledge_sources_are_references_so_their_creation_reconciles_the_agent() -> None:
    refs = agent_references(inputs(agent_body(knowledge=KNOWLEDGE)).agent, {})
    assert "team-handbook" in refs.config_maps and "kb" in refs.secrets


def test_without_knowledge_nothing_is_mounted() -> None:
    tool = _pod(plan_agent(inputs(agent_body()), settings=RenderSettings()), "tool")
    assert not any(v["name"].startswith("knowledge-") for v in tool["volumes"])


def test_the_crd_accepts_one_source_per_entry_and_the_chart_ships_it() -> None:
    crd = yaml.safe_load((REPO_ROOT / "crds" / "agentengine.io_agents.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    item = spec["knowledge"]["items"]
    assert set(item["properties"]) == {"name", "configMapName", "secretName"}
    assert item["x-kubernetes-validations"][0]["rule"] == "has(self.configMapName) != has(self.secretName)"
    shipped = Path(REPO_ROOT / "charts" / "agent-engine" / "crds" / "agentengine.io_agents.yaml")
    assert shipped.read_text() == (REPO_ROOT / "crds" / "agentengine.io_agents.yaml").read_text()
