"""spec.runtime against the real API server (issue 40): the CRD's enum, default and per-runtime entrypoint
rules, and an Agent stored under the CRD before the field existed, which still reconciles once the new CRD
is applied, then moves to the Node runner when its runtime changes."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.cluster.controlplane import ControlPlane
from tests.cluster.operator_harness import (
    CRDS,
    Api,
    RunningOperator,
    apply_all,
    manifests,
    ready,
    wait_for,
)

NODE_LAUNCHER = ["node", "/opt/agent-engine/runner/launcher.js"]
PYTHON_LAUNCHER = ["python", "-m", "agent_runtime.launcher"]
_NAME = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
PYTHON_ENTRYPOINT = f"^{_NAME}:{_NAME}$"


def _agent(api: Api, name: str, **spec: object) -> dict[str, Any]:
    return {
        "apiVersion": "agentengine.io/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": api.namespace},
        "spec": {"entrypoint": "pkg.mod:app", **spec},
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"runtime": "java"}, 'supported values: "python", "node"'),
        ({"entrypoint": "/app/dist/agent.js:app"}, "with runtime python is package.module:attribute"),
        ({"runtime": "python", "entrypoint": "agent"}, "with runtime python is package.module:attribute"),
        ({"runtime": "node", "entrypoint": "/app/agent.js:app:x"}, "with runtime node is a module path"),
        ({"runtime": "node", "entrypoint": "/app/my agent.js"}, "with runtime node is a module path"),
        ({"runtime": "node", "entrypoint": ""}, "spec.entrypoint"),
    ],
)
def test_runtime_and_entrypoint_contradictions_are_refused_naming_the_field(
    api: Api, spec: dict[str, object], message: str
) -> None:
    response = api.apply(_agent(api, "bad", **spec))
    assert response.status_code == 422, response.text
    said = response.json()["message"]
    assert message in said and ("spec.runtime" in said or "spec.entrypoint" in said), said


def test_runtime_defaults_to_python_and_node_entrypoints_are_stored(api: Api) -> None:
    assert api.must_apply(_agent(api, "plain"))["spec"]["runtime"] == "python"
    for name, entrypoint in (("n1", "/app/dist/agent.js:app"), ("n2", "@team/agent"), ("n3", "./a.js:$x")):
        stored = api.must_apply(_agent(api, name, runtime="node", entrypoint=entrypoint))
        assert stored["spec"]["runtime"] == "node" and stored["spec"]["entrypoint"] == entrypoint


def _crd_before_runtime() -> dict[str, Any]:
    """The Agent CRD as it was before spec.runtime: no such field, the Python entrypoint as a pattern."""
    crd = yaml.safe_load(CRDS[0].read_text())
    old = copy.deepcopy(crd)
    (version,) = old["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    del spec["properties"]["runtime"]
    del spec["x-kubernetes-validations"]
    spec["properties"]["entrypoint"]["pattern"] = PYTHON_ENTRYPOINT
    version["additionalPrinterColumns"] = [
        c for c in version["additionalPrinterColumns"] if c["name"] != "Runtime"
    ]
    return old


def _command(api: Api, component: str) -> list[str] | None:
    body = api.get("deployments", f"bot-{component}") or {}
    containers = ((body.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
    return containers[0]["command"] if containers else None


def test_an_agent_stored_before_runtime_existed_reconciles_then_switches_to_node(
    cluster: ControlPlane, api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    old_crd = yaml.safe_dump(_crd_before_runtime())
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=old_crd)
    try:
        objs = manifests(api.namespace)
        apply_all(api, objs)
        stored = api.get("agents", "bot") or {}
        assert "runtime" not in stored["spec"]  # etcd holds the Agent without the field
    finally:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS[0]))
    cluster.kubectl("wait", "--for=condition=Established", "crd/agents.agentengine.io", "--timeout=60s")
    # Read back under the new schema, the stored Agent carries the default (the API server applies it on
    # read), and the operator runs it with the Python launcher as before.
    wait_for(
        "the default on read", lambda: (api.get("agents", "bot") or {})["spec"].get("runtime") == "python"
    )
    start_operator()
    ready(api)
    assert _command(api, "aer") == PYTHON_LAUNCHER and _command(api, "tool") == PYTHON_LAUNCHER

    agent = objs["agent"]
    agent["spec"].update(runtime="node", entrypoint="/app/dist/agent.js:app")
    api.must_apply(agent)
    wait_for("the Node launcher", lambda: all(_command(api, c) == NODE_LAUNCHER for c in ("aer", "tool")))
    ready(api)
    printed = cluster.kubectl("get", "agents", "-n", api.namespace, "-o", "wide").stdout
    assert "RUNTIME" in printed and "node" in printed
