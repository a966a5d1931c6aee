"""`agentengine` without --server against the real kube-apiserver (issue 29): it looks for the OE through
the kubeconfig's cluster as a user would, and each way that can fail is one line naming the fix, a non-zero
exit and no traceback: a user who may not list Services everywhere, no OE installed, an OE Service without a
Ready pod, a user without pods/portforward, and a pod the API server cannot port-forward to (a KWOK pod: no
kubelet behind it). The forward's data path needs a real pod (the real node) and is not covered here."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.cluster.controlplane import ControlPlane, wait_until
from tests.exec_credential import exec_user
from tests.integration.cli.driver import SCRIPT, cli_env
from tests.integration.cli.driver import one_line_error as one_line

pytestmark = pytest.mark.cluster
OE_LABELS = {"app.kubernetes.io/component": "oe", "app.kubernetes.io/instance": "cli-test"}


def agentengine(
    kubeconfig: Path, *argv: str, oe_namespace: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = cli_env(None, token=None, env={"KUBECONFIG": str(kubeconfig)})
    if oe_namespace is not None:
        env["AGENTENGINE_OE_NAMESPACE"] = oe_namespace
    return subprocess.run([str(SCRIPT), *argv], env=env, capture_output=True, text=True, timeout=60)


def with_exec_plugin(kubeconfig: Path, tmp_path: Path) -> Path:
    """The same user, its token given by an exec plugin (as a cloud's kubeconfig does)."""
    document = yaml.safe_load(kubeconfig.read_text())
    token_file = tmp_path / "token"
    token_file.write_text(document["users"][0]["user"]["token"])
    document["users"][0]["user"] = exec_user(token_file=token_file, calls_file=tmp_path / "calls")
    path = tmp_path / "exec.kubeconfig"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture
def user(cluster: ControlPlane, cluster_namespace: str, tmp_path: Path) -> Iterator[Path]:
    """A ServiceAccount of the test namespace whose kubeconfig's token comes from an exec plugin."""
    plain = cluster.service_account_kubeconfig(namespace=cluster_namespace, name="cli-user")
    yield with_exec_plugin(plain, tmp_path)


def kubectl(cluster: ControlPlane, *argv: str, stdin: str | None = None, check: bool = True) -> str:
    done = subprocess.run(
        [str(cluster.bin_dir / "kubectl"), *argv],
        env=cluster.env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=check,
    )
    return done.stdout


def can_i(cluster: ControlPlane, verb: str, resource: str, *, namespace: str, who: str) -> bool:
    answer = kubectl(cluster, "auth", "can-i", verb, resource, "-n", namespace, f"--as={who}", check=False)
    return answer.strip() == "yes"


def test_finding_the_oe_through_the_kubeconfig_names_each_fix(
    cluster: ControlPlane, cluster_namespace: str, user: Path
) -> None:
    ns, account = cluster_namespace, f"system:serviceaccount:{cluster_namespace}:cli-user"
    # May not list Services in every namespace: told to name the OE's namespace.
    refused = one_line(agentengine(user, "get", "executions"), code=4)
    assert "AGENTENGINE_OE_NAMESPACE" in refused and "--server" in refused

    # `view` in its namespace: no OE there is a 3 naming the chart.
    kubectl(cluster, "create", "rolebinding", "cli-view", "-n", ns, "--clusterrole=view", f"--user={account}")
    wait_until(
        "view granted",
        lambda: (
            kubectl(cluster, "auth", "can-i", "list", "services", "-n", ns, f"--as={account}").strip()
            == "yes"
        ),
    )
    missing = one_line(agentengine(user, "get", "executions", oe_namespace=ns), code=3)
    assert f"no Agent Engine OE in namespace {ns}" in missing and "helm install" in missing

    # An OE Service with no Ready pod behind it.
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "agent-engine-oe", "labels": OE_LABELS},
        "spec": {"selector": OE_LABELS, "ports": [{"name": "http", "port": 8080, "targetPort": "http"}]},
    }
    kubectl(cluster, "apply", "-n", ns, "-f", "-", stdin=yaml.safe_dump(service))
    no_pod = one_line(agentengine(user, "get", "executions", oe_namespace=ns), code=1)
    assert "has no Ready pod" in no_pod and f"kubectl -n {ns} get pods" in no_pod

    # A Ready pod (KWOK's).
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "agent-engine-oe-0", "labels": OE_LABELS},
        "spec": {
            "containers": [{"name": "oe", "image": "oe", "ports": [{"name": "http", "containerPort": 8080}]}]
        },
    }
    kubectl(cluster, "apply", "-n", ns, "-f", "-", stdin=yaml.safe_dump(pod))
    wait_until(
        "the OE pod Ready",
        lambda: "True" in kubectl(cluster, "get", "pod", "agent-engine-oe-0", "-n", ns, "-o",
                                  "jsonpath={.status.conditions[?(@.type=='Ready')].status}"),
        timeout=60,
    )  # fmt: skip
    # `view` may not port-forward to it.
    denied = one_line(agentengine(user, "get", "executions", oe_namespace=ns), code=4)
    assert "pods/portforward" in denied and ns in denied

    # With pods/portforward (edit): the API server has no kubelet to forward to for a KWOK pod.
    kubectl(cluster, "create", "rolebinding", "cli-edit", "-n", ns, "--clusterrole=edit", f"--user={account}")
    wait_until(
        "edit granted", lambda: can_i(cluster, "create", "pods/portforward", namespace=ns, who=account)
    )
    unreachable = one_line(agentengine(user, "get", "executions", oe_namespace=ns), code=1)
    assert "agent-engine-oe-0" in unreachable and "--server" in unreachable
