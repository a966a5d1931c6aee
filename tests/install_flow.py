"""The platform team's journey, as steps shared by the cluster tier and the kind e2e suite.

Each step drives the real `helm` and `kubectl` binaries against whatever cluster `Kube.env` points at:
the test control plane (tests/cluster) or a kind cluster (tests/e2e). Both tiers assert through these
functions, so the same checks run in both places.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_operator.render import component_name, token_secret_name

REPO_ROOT = Path(__file__).resolve().parent.parent
CHART = REPO_ROOT / "charts" / "agent-engine"
EXAMPLES = REPO_ROOT / "examples" / "kubernetes"
EXAMPLE_AGENT = "echo-agent"
RELEASE = "agent-engine"
OUR_KINDS = ("agents.agentengine.io", "connectors.agentengine.io")


class StepFailed(AssertionError):
    """A step's command failed or its condition never held; the message carries the command's output."""


@dataclass(frozen=True)
class Kube:
    """kubectl and helm from `bin_dir`, with an environment naming the cluster (KUBECONFIG)."""

    bin_dir: Path
    env: Mapping[str, str]

    def run(self, tool: str, *args: str, stdin: str | None = None, check: bool = True) -> str:
        proc = subprocess.run(
            [str(self.bin_dir / tool), *args],
            input=stdin,
            env=dict(self.env),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if check and proc.returncode != 0:
            raise StepFailed(f"{tool} {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}")
        return proc.stdout

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        return self.run("kubectl", *args, stdin=stdin, check=check)

    def helm(self, *args: str, check: bool = True) -> str:
        return self.run("helm", *args, check=check)

    def get_json(self, *args: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", *args, "-o", "json"))


def eventually(what: str, check: Callable[[], Any], *, timeout: float = 120.0, interval: float = 1.0) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` and the last error."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            result = check()
        except (StepFailed, subprocess.TimeoutExpired, KeyError, ValueError) as error:
            last = error
        else:
            if result:
                return result
            last = result
        time.sleep(interval)
    raise StepFailed(f"timed out after {timeout:.0f}s waiting for {what}; last: {last}")


def helm_values_args(values: Mapping[str, str]) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def helm_install(kube: Kube, *, namespace: str, values: Mapping[str, str] | None = None) -> None:
    kube.helm(
        "install", RELEASE, str(CHART), "--namespace", namespace, "--create-namespace", "--wait=false",
        *helm_values_args(values or {}),
    )  # fmt: skip


def helm_upgrade(kube: Kube, *, namespace: str, values: Mapping[str, str] | None = None) -> None:
    kube.helm("upgrade", RELEASE, str(CHART), "--namespace", namespace, *helm_values_args(values or {}))


def helm_uninstall(kube: Kube, *, namespace: str) -> None:
    kube.helm("uninstall", RELEASE, "--namespace", namespace, "--wait")


def crds_established(kube: Kube) -> bool:
    for crd in OUR_KINDS:
        conditions = kube.get_json("crd", crd).get("status", {}).get("conditions", [])
        if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return False
    return True


def apply_example(kube: Kube, *, namespace: str, files: Sequence[str] = ("echo-agent.yaml",)) -> None:
    for name in files:
        kube.kubectl("apply", "--namespace", namespace, "-f", str(EXAMPLES / name))


def agent_condition(kube: Kube, *, namespace: str, agent: str, type_: str = "Ready") -> dict[str, Any] | None:
    status = kube.get_json("agent", agent, "--namespace", namespace).get("status") or {}
    return next((c for c in status.get("conditions", []) if c.get("type") == type_), None)


def wait_agent_ready(
    kube: Kube, *, namespace: str, agent: str = EXAMPLE_AGENT, timeout: float = 180.0
) -> dict:
    def ready() -> dict[str, Any] | None:
        condition = agent_condition(kube, namespace=namespace, agent=agent)
        return condition if condition and condition.get("status") == "True" else None

    eventually(f"Agent {namespace}/{agent} Ready", ready, timeout=timeout)
    return kube.get_json("agent", agent, "--namespace", namespace)


def runtime_token(kube: Kube, *, namespace: str, agent: str = EXAMPLE_AGENT) -> str:
    secret = kube.get_json("secret", token_secret_name(agent), "--namespace", namespace)
    return base64.b64decode(secret["data"]["token"]).decode()


def tool_service(agent: str = EXAMPLE_AGENT) -> str:
    return component_name(agent, "tool")


def owned_objects(kube: Kube, *, namespace: str, agent: str = EXAMPLE_AGENT) -> list[str]:
    """Everything in the namespace labelled as belonging to `agent` (what deleting it must remove)."""
    out = kube.kubectl(
        "get", "configmaps,secrets,serviceaccounts,services,deployments,networkpolicies",
        "--namespace", namespace, "-l", f"app.kubernetes.io/instance={agent}", "-o", "name",
    )  # fmt: skip
    return out.split()


def release_leftovers(kube: Kube, *, namespace: str) -> list[str]:
    """Objects of the Helm release still present (after uninstall: only the CRDs Helm keeps may remain)."""
    selector = f"app.kubernetes.io/instance={RELEASE}"
    namespaced = kube.kubectl(
        "get", "deployments,serviceaccounts,roles,rolebindings,kopfpeerings", "--all-namespaces",
        "-l", selector, "-o", "name",
    )  # fmt: skip
    cluster = kube.kubectl(
        "get", "clusterroles,clusterrolebindings,clusterkopfpeerings", "-l", selector, "-o", "name"
    )
    return namespaced.split() + cluster.split()
