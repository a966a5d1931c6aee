"""spec.runtime: each component's image and command for a Python and a Node Agent (issue 40)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_operator.inputs import InputProblem
from agent_operator.models import AgentSpec
from agent_operator.reconcile import plan_agent
from agent_operator.render import APPLIED_HASH
from agent_operator.settings import OperatorSettings, RenderSettings
from agent_runtime import contract
from tests.unit.operator.golden import assert_golden
from tests.unit.operator.specimens import agent_body, inputs

PYTHON_IMAGE = "agent-engine/runtime:0.2.0"
NODE_IMAGE = "agent-engine/runtime-node:0.2.0"
SETTINGS = RenderSettings(default_image=PYTHON_IMAGE, default_node_image=NODE_IMAGE)


def _node_agent(**spec: Any) -> dict[str, Any]:
    node = {
        "runtime": "node",
        "image": "registry.example.com/team-a/graph-bot:2.0.0",
        "entrypoint": "/app/dist/agent.js:app",
    }
    return agent_body("graph-bot", **(node | spec))


def _containers(body: dict[str, Any], settings: RenderSettings = SETTINGS) -> dict[str, dict[str, Any]]:
    plan = plan_agent(inputs(agent=body), settings=settings)
    deployments = [d.manifest for d in plan.objects if d.manifest["kind"] == "Deployment"]
    return {
        d["metadata"]["name"].rsplit("-", 1)[1]: d["spec"]["template"]["spec"]["containers"][0]
        for d in deployments
    }


def test_golden_node_agent_with_memory() -> None:
    body = _node_agent(components={"memory": {"enabled": True}})
    plan = plan_agent(inputs(agent=body), settings=SETTINGS)
    assert_golden("node_agent", [d.manifest for d in plan.objects])


def test_an_agent_written_without_runtime_runs_the_python_launcher() -> None:
    body = agent_body(components={"memory": {"enabled": True}})
    assert "runtime" not in body["spec"]
    assert AgentSpec.model_validate(body["spec"]).runtime == contract.Runtime.PYTHON
    for container in _containers(body).values():
        assert container["command"] == ["python", "-m", "agent_runtime.launcher"]
        assert container["image"] == "registry.example.com/team-a/support-bot:1.4.2"


def test_a_node_agent_runs_the_typescript_launcher_and_its_memory_the_python_image() -> None:
    containers = _containers(_node_agent(components={"memory": {"enabled": True}}))
    for component in ("aer", "tool"):
        assert containers[component]["command"] == ["node", contract.NODE_LAUNCHER_PATH]
        assert containers[component]["image"] == "registry.example.com/team-a/graph-bot:2.0.0"
        env = {e["name"]: e.get("value") for e in containers[component]["env"]}
        assert env[contract.ENTRYPOINT_ENV] == "/app/dist/agent.js:app"
        assert env[contract.RUNNER_MODE_ENV] == component
    # The Memory server is platform Python code: the tenant's Node image does not hold it.
    assert containers["memory"]["command"] == list(contract.IMAGE_COMMAND)
    assert containers["memory"]["image"] == PYTHON_IMAGE


def test_switching_runtime_changes_the_command_and_so_the_applied_hash() -> None:
    node = plan_agent(inputs(agent=_node_agent()), settings=SETTINGS)
    body = _node_agent(runtime="python", entrypoint="graph_bot.app:app")
    python = plan_agent(inputs(agent=body), settings=SETTINGS)
    hashes = [
        {
            d.manifest["metadata"]["name"]: d.manifest["metadata"]["annotations"][APPLIED_HASH]
            for d in plan.objects
            if d.manifest["kind"] == "Deployment"
        }
        for plan in (node, python)
    ]
    # Each Deployment's hash moves, so the apply layer patches it and its pods roll onto the other runner.
    assert hashes[0].keys() == hashes[1].keys() and all(hashes[0][k] != hashes[1][k] for k in hashes[0])


def test_a_node_agent_without_image_runs_the_default_node_runtime_image() -> None:
    body = _node_agent()
    del body["spec"]["image"]
    containers = _containers(body)
    assert {c["image"] for c in containers.values()} == {NODE_IMAGE}


def _refusal(body: dict[str, Any], settings: RenderSettings) -> InputProblem:
    with pytest.raises(InputProblem) as caught:
        plan_agent(inputs(agent=body), settings=settings)
    return caught.value


def test_a_node_agent_without_image_and_no_node_default_is_refused_naming_the_value() -> None:
    body = _node_agent()
    del body["spec"]["image"]
    problem = _refusal(body, RenderSettings(default_image=PYTHON_IMAGE))
    assert problem.reason == "ImageInvalid"
    assert "default node runtime image" in problem.message
    assert "image.nodeRuntime" in problem.message and "AGENT_OPERATOR_DEFAULT_NODE_IMAGE" in problem.message


def test_a_node_agents_memory_without_a_python_runtime_image_is_refused() -> None:
    problem = _refusal(_node_agent(components={"memory": {"enabled": True}}), RenderSettings())
    assert problem.reason == "ImageInvalid"
    assert "spec.components.memory" in problem.message and "image.runtime" in problem.message


def test_the_default_node_image_comes_from_the_environment() -> None:
    settings = OperatorSettings.from_env({"AGENT_OPERATOR_DEFAULT_NODE_IMAGE": NODE_IMAGE})
    assert settings.render.default_node_image == NODE_IMAGE and settings.render.default_image is None
