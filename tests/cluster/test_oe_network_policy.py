"""The chart's OE NetworkPolicy (issue 27), enforced by kube-router on the real node: who reaches the OE
(the chart's operator among them, for Connectors' connection tests), whom the OE reaches (the Memory
servers among them, for the knowledge documents), and its registration watch still passing (the API
server's endpoint as installed).

Stand-ins for an Agent's pods carry the labels the operator renders (agentengine.io/agent, .../component),
so no operator runs here; `tests/install_flow.py`'s journey checks the same paths between the real ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster.controlplane import ControlPlane, ensure_binaries
from tests.cluster.realnode import build_images, missing_prerequisites, placement_annotations
from tests.install_flow import (
    Kube,
    connects,
    create_namespace,
    eventually,
    helm_install,
    helm_uninstall,
    helm_upgrade,
    project_version,
    rollout,
    running_pod,
)

pytestmark = pytest.mark.timeout(1800)

SYSTEM, APPS = "ae-np-system", "ae-np-apps"
OE = f"agent-engine-oe.{SYSTEM}.svc.cluster.local"
RUNTIME_IMAGE = f"agent-engine/runtime:{project_version()}"
OPERATOR_IMAGE = f"agent-engine/operator:{project_version()}"


@pytest.fixture(scope="module")
def kube() -> Iterator[Kube]:
    bin_dir = ensure_binaries(real_node=True)
    if missing := missing_prerequisites(bin_dir):
        pytest.skip(f"a real node needs {', '.join(missing)}")
    archives = build_images()
    plane = ControlPlane(bin_dir=bin_dir, nodes=1, real_node=True, network_policies=True)
    plane.start()
    try:
        assert plane.node is not None
        plane.node.load_project_images(archives, [RUNTIME_IMAGE, OPERATOR_IMAGE])
        yield Kube(bin_dir=plane.bin_dir, env=plane.env())
    finally:
        plane.stop()


def _server(name: str, port: int, labels: dict[str, str]) -> list[dict[str, Any]]:
    """A pod listening on `port` (the runtime image's Python) and its Service."""
    security = {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    command = ["python", "-m", "http.server", str(port), "--bind", "0.0.0.0", "--directory", "/"]
    container = {"name": "c", "image": RUNTIME_IMAGE, "imagePullPolicy": "Never", "securityContext": security}
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {**labels, "probe": name}},
            "spec": {"containers": [{**container, "command": command}]},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {"selector": {"probe": name}, "ports": [{"port": port, "targetPort": port}]},
        },
    ]


def _paths(kube: Kube) -> dict[str, bool]:
    oe = running_pod(kube, namespace=SYSTEM, selector="app.kubernetes.io/component=oe")["metadata"]["name"]
    operator = running_pod(kube, namespace=SYSTEM, selector="app.kubernetes.io/component=operator")

    def svc(name: str) -> str:
        return f"{name}.{APPS}.svc.cluster.local"

    return {
        "AER -> OE": connects(kube, namespace=APPS, pod="fake-aer", host=OE, port=8080),
        "Tool Pod -> OE": connects(kube, namespace=APPS, pod="fake-tool", host=OE, port=8080),
        "other pod -> OE": connects(kube, namespace=APPS, pod="provider", host=OE, port=8080),
        # A Connector's connection test (issue 36): the chart's operator asks the OE.
        "operator -> OE": connects(
            kube, namespace=SYSTEM, pod=operator["metadata"]["name"], host=OE, port=8080
        ),
        "OE -> AER": connects(kube, namespace=SYSTEM, pod=oe, host=svc("fake-aer"), port=8001),
        "OE -> Tool Pod": connects(kube, namespace=SYSTEM, pod=oe, host=svc("fake-tool"), port=8002),
        # The client API's knowledge documents (issue 37).
        "OE -> Memory": connects(kube, namespace=SYSTEM, pod=oe, host=svc("fake-memory"), port=8081),
        "OE -> provider": connects(kube, namespace=SYSTEM, pod=oe, host=svc("provider"), port=8080),
    }


def test_the_oe_policy_admits_aers_and_reaches_runtimes_and_its_registrations_only(kube: Kube) -> None:
    for namespace in (SYSTEM, APPS):
        create_namespace(kube, namespace, annotations=placement_annotations())
    helm_install(kube, namespace=SYSTEM)
    rollout(kube, namespace=SYSTEM, deployment="agent-engine-oe")
    rollout(kube, namespace=SYSTEM, deployment="agent-engine-operator")
    agent = {"agentengine.io/agent": "shop"}
    objects = [
        *_server("fake-aer", 8001, {**agent, "agentengine.io/component": "aer"}),
        *_server("fake-tool", 8002, {**agent, "agentengine.io/component": "tool"}),
        *_server("fake-memory", 8081, {**agent, "agentengine.io/component": "memory"}),
        *_server("provider", 8080, {}),
    ]
    kube.kubectl(
        "apply",
        "-n",
        APPS,
        "-f",
        "-",
        stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": objects}),
    )
    for name in ("fake-aer", "fake-tool", "fake-memory", "provider"):
        kube.kubectl("wait", "-n", APPS, "--for=condition=Ready", f"pod/{name}", "--timeout=180s")

    expected = {
        "AER -> OE": True,
        "Tool Pod -> OE": False,  # a Tool Pod reaches the OE only through its AER's step results
        "other pod -> OE": False,  # not a client namespace (none is labelled agentengine.io/oe-client)
        "operator -> OE": True,
        "OE -> AER": True,
        "OE -> Tool Pod": True,
        "OE -> Memory": True,
        "OE -> provider": False,  # no tool call leaves from the OE itself
    }
    assert eventually("the OE's policy enforced", lambda: _paths(kube) == expected or None, timeout=60)

    # Its watch of the registrations still reaches the API server: a bad registration is read and reported.
    registrations = f"{SYSTEM}-registrations"
    kube.kubectl(
        "create", "secret", "generic", "bad-reg", "-n", registrations, "--from-literal=registration.json=x"
    )
    kube.kubectl("label", "secret", "bad-reg", "-n", registrations, "agentengine.io/oe-registration=true")
    oe = running_pod(kube, namespace=SYSTEM, selector="app.kubernetes.io/component=oe")["metadata"]["name"]

    def reported() -> list[str]:
        logs = kube.kubectl("logs", "-n", SYSTEM, oe).splitlines()
        assert not [line for line in logs if "registration Secrets in" in line], logs[-5:]  # a refused watch
        return [line for line in logs if "bad-reg skipped" in line]

    assert eventually("the OE reporting the bad registration", reported, timeout=60)

    # Weakened on purpose: without the policy the Tool Pod and any pod reach the OE, and the OE a provider.
    helm_upgrade(kube, namespace=SYSTEM, values={"oe.networkPolicy.enabled": "false"})
    assert eventually(
        "every path open without the policy",
        lambda: _paths(kube) == dict.fromkeys(expected, True) or None,
        timeout=60,
    )
    helm_uninstall(kube, namespace=SYSTEM)
