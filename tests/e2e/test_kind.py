"""End to end on kind: install with Helm, run the example Agent, call a tool through the Tool Pod Service."""

from __future__ import annotations

import subprocess
import time

import httpx

from tests.conftest import free_port
from tests.install_flow import (
    EXAMPLE_AGENT,
    Kube,
    apply_example,
    crds_established,
    eventually,
    helm_install,
    helm_uninstall,
    helm_upgrade,
    owned_objects,
    release_leftovers,
    runtime_token,
    tool_service,
    wait_agent_ready,
)

SYSTEM_NS = "agent-engine"
APP_NS = "default"


def _port_forward(kube: Kube, *, namespace: str, service: str, remote: int) -> tuple[subprocess.Popen, int]:
    local = free_port()
    proc = subprocess.Popen(
        [str(kube.bin_dir / "kubectl"), "port-forward", "--namespace", namespace, f"svc/{service}",
         f"{local}:{remote}", "--address", "127.0.0.1"],
        env=dict(kube.env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    eventually("port-forward", lambda: httpx.get(f"http://127.0.0.1:{local}/healthz").status_code == 200)
    return proc, local


def test_install_run_call_upgrade_delete(kind_cluster: Kube) -> None:
    kube = kind_cluster
    helm_install(kube, namespace=SYSTEM_NS)
    eventually("CRDs established", lambda: crds_established(kube))
    kube.kubectl(
        "rollout", "status", "--namespace", SYSTEM_NS, "deployment/agent-engine-operator", "--timeout=180s"
    )

    apply_example(kube, namespace=APP_NS, files=("provider.yaml", "echo-agent.yaml"))
    agent = wait_agent_ready(kube, namespace=APP_NS, timeout=300)
    assert agent["status"]["bundle"]["toolCount"] >= 2

    token = runtime_token(kube, namespace=APP_NS)
    forward, port = _port_forward(kube, namespace=APP_NS, service=tool_service(), remote=8002)
    try:
        base = f"http://127.0.0.1:{port}"
        assert (
            httpx.post(f"{base}/execute", json={"tool": "echo_getEcho", "arguments": {}}).status_code == 401
        )
        answer = httpx.post(
            f"{base}/execute",
            headers={"Authorization": f"Bearer {token}"},
            json={
                "tool": "echo_getEcho",
                "arguments": {"word": "kind", "times": 2},
                "execution_id": "e2e",
                "step": 1,
            },
            timeout=30,
        ).json()
        assert answer["status"] == "success", answer
        assert answer["result"]["body"]["word"] == "kind"
    finally:
        forward.terminate()

    helm_upgrade(kube, namespace=SYSTEM_NS, values={"operator.logFormat": "text"})
    kube.kubectl(
        "rollout", "status", "--namespace", SYSTEM_NS, "deployment/agent-engine-operator", "--timeout=180s"
    )
    wait_agent_ready(kube, namespace=APP_NS)

    kube.kubectl("delete", "agent", EXAMPLE_AGENT, "--namespace", APP_NS, "--wait=true")
    eventually("owned objects removed", lambda: not owned_objects(kube, namespace=APP_NS), timeout=120)
    helm_uninstall(kube, namespace=SYSTEM_NS)
    time.sleep(1)
    assert release_leftovers(kube, namespace=SYSTEM_NS) == []
