"""The test control plane is real: scheduling, kubelet status via KWOK, CRD validation, GC, SSA, RBAC."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.cluster.controlplane import (
    REPO_ROOT,
    ControlPlane,
    binary_versions,
    pinned_versions,
    sweep_stale_dirs,
    wait_until,
)
from tests.cluster.processes import pid_alive, wait_gone


def test_every_binary_reports_the_pinned_version(cluster: ControlPlane) -> None:
    pins = pinned_versions()
    versions = binary_versions(cluster.bin_dir)
    assert pins["ETCD_VERSION"].lstrip("v") in versions["etcd"]
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert versions[name] == f"Kubernetes {pins['K8S_VERSION']}"
    assert pins["KWOK_VERSION"].lstrip("v") in versions["kwok"]
    assert "v1.35." in versions["kubectl"]
    assert versions["helm"].startswith("v4.")
    with cluster.api_client() as api:
        assert client.VersionApi(api).get_code().git_version == pins["K8S_VERSION"]


def test_deployment_pods_become_running_and_ready(cluster: ControlPlane, cluster_namespace: str) -> None:
    labels = {"app": "web"}
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=3,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[client.V1Container(name="web", image="example.invalid/web:1")]
                ),
            ),
        ),
    )
    with cluster.api_client() as api:
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        apps.create_namespaced_deployment(cluster_namespace, deployment)

        wait_until(
            "3 available replicas",
            lambda: (
                (
                    apps.read_namespaced_deployment_status("web", cluster_namespace).status.available_replicas
                    or 0
                )
                == 3
            ),
        )
        pods = core.list_namespaced_pod(cluster_namespace, label_selector="app=web").items
    assert len(pods) == 3
    for pod in pods:
        assert pod.status.phase == "Running"
        assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"
        assert pod.spec.node_name in cluster.node_names  # bound by the scheduler
        assert pod.status.pod_ip  # given by KWOK's pod-ready stage


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.agentengine.io"},
    "spec": {
        "group": "test.agentengine.io",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {"size": {"type": "integer", "minimum": 1}},
                            }
                        },
                    }
                },
            }
        ],
    },
}


def test_structural_crd_schema_rejects_an_invalid_object(
    cluster: ControlPlane, cluster_namespace: str
) -> None:
    with cluster.api_client() as api:
        extensions = client.ApiextensionsV1Api(api)
        try:
            extensions.create_custom_resource_definition(CRD)
        except ApiException as error:
            assert error.status == 409  # made by an earlier run of this test in the same session
        wait_until(
            "the CRD to be Established",
            lambda: any(
                c.type == "Established" and c.status == "True"
                for c in extensions.read_custom_resource_definition(CRD["metadata"]["name"]).status.conditions
                or []
            ),
        )
        custom = client.CustomObjectsApi(api)

        def create(name: str, spec: dict[str, object]) -> dict[str, object]:
            body = {
                "apiVersion": "test.agentengine.io/v1",
                "kind": "Widget",
                "metadata": {"name": name},
                "spec": spec,
            }
            return custom.create_namespaced_custom_object(
                "test.agentengine.io", "v1", cluster_namespace, "widgets", body
            )

        # Discovery of a new CRD lags Established by a moment; a valid object proves it is served.
        wait_until("the Widget kind to be served", lambda: _created(lambda: create("good", {"size": 3})))
        with pytest.raises(ApiException) as wrong_type:
            create("bad", {"size": "large"})
        with pytest.raises(ApiException) as missing:
            create("bad", {})
    assert wrong_type.value.status == 422
    assert "spec.size" in wrong_type.value.body
    assert missing.value.status == 422
    assert "spec.size: Required value" in missing.value.body


def _created(create: object) -> bool:
    try:
        create()  # type: ignore[operator]
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def test_deleting_an_owner_garbage_collects_its_dependents(
    cluster: ControlPlane, cluster_namespace: str
) -> None:
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        owner = core.create_namespaced_config_map(
            cluster_namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
        )
        reference = client.V1OwnerReference(
            api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
        )
        for i in range(3):
            core.create_namespaced_config_map(
                cluster_namespace,
                client.V1ConfigMap(
                    metadata=client.V1ObjectMeta(name=f"dependent-{i}", owner_references=[reference])
                ),
            )
        core.delete_namespaced_config_map("owner", cluster_namespace, propagation_policy="Background")

        def dependents() -> list[str]:
            return [
                cm.metadata.name
                for cm in core.list_namespaced_config_map(cluster_namespace).items
                if cm.metadata.name.startswith("dependent-")
            ]

        wait_until("the garbage collector to delete the dependents", lambda: not dependents())


def test_server_side_apply_from_two_managers_reports_a_conflict(
    cluster: ControlPlane, cluster_namespace: str
) -> None:
    def manifest(value: str) -> str:
        return yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "shared", "namespace": cluster_namespace},
                "data": {"owner": value},
            }
        )

    def apply(manager: str, value: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return cluster.kubectl(
            "apply",
            "--server-side",
            f"--field-manager={manager}",
            *extra,
            "-f",
            "-",
            input=manifest(value),
            check=False,
        )

    first = apply("alice", "a")
    assert first.returncode == 0, first.stderr
    conflict = apply("bob", "b")
    assert conflict.returncode != 0
    assert "conflict" in conflict.stderr.lower()
    assert '"alice"' in conflict.stderr and ".data.owner" in conflict.stderr

    forced = apply("bob", "b", "--force-conflicts")
    assert forced.returncode == 0, forced.stderr
    live = json.loads(
        cluster.kubectl(
            "get", "configmap", "shared", "-n", cluster_namespace, "-o", "json", "--show-managed-fields"
        ).stdout
    )
    assert live["data"] == {"owner": "b"}
    managers = {
        entry["manager"] for entry in live["metadata"]["managedFields"] if "f:data" in entry["fieldsV1"]
    }
    assert managers == {"bob"}


def test_service_account_token_is_bound_by_rbac(cluster: ControlPlane, cluster_namespace: str) -> None:
    kubeconfig = cluster.service_account_kubeconfig(namespace=cluster_namespace, name="reader")
    env = {**cluster.env(), "KUBECONFIG": str(kubeconfig)}

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(cluster.bin_dir / "kubectl"), *args], env=env, capture_output=True, text=True, timeout=60
        )

    who = kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert who.stdout == f"system:serviceaccount:{cluster_namespace}:reader", who.stderr
    denied = kubectl("get", "pods")
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()

    cluster.kubectl(
        "create", "role", "pod-reader", "--verb=get,list", "--resource=pods", "-n", cluster_namespace
    )
    cluster.kubectl(
        "create",
        "rolebinding",
        "reader",
        "--role=pod-reader",
        f"--serviceaccount={cluster_namespace}:reader",
        "-n",
        cluster_namespace,
    )
    wait_until("RBAC to allow the reader", lambda: kubectl("get", "pods").returncode == 0, timeout=30)
    assert kubectl("auth", "can-i", "delete", "pods").stdout.strip() == "no"


def test_helm_reaches_the_control_plane(cluster: ControlPlane) -> None:
    listed = subprocess.run(
        [str(cluster.bin_dir / "helm"), "list", "--all-namespaces", "-o", "json"],
        env=cluster.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []


def _serve(tmp_path: Path, bin_dir: Path) -> tuple[subprocess.Popen[bytes], dict[str, object]]:
    """Start `controlplane serve` in its own process and wait until it published its state."""
    state_file = tmp_path / "state.json"
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.cluster.controlplane",
            "serve",
            f"--bin-dir={bin_dir}",
            f"--state-file={state_file}",
        ],
        cwd=REPO_ROOT,
        stdout=(tmp_path / "serve.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_until(
            "the control plane to start", lambda: state_file.exists() or serve.poll() is not None, timeout=120
        )
    except BaseException:
        os.killpg(serve.pid, signal.SIGKILL)
        raise
    assert serve.poll() is None, (tmp_path / "serve.log").read_text()[-4000:]
    return serve, json.loads(state_file.read_text())


def test_an_interrupted_harness_leaves_no_process_and_no_directory(
    cluster: ControlPlane, tmp_path: Path
) -> None:
    serve, state = _serve(tmp_path, cluster.bin_dir)
    pids = list(state["pids"].values())  # type: ignore[union-attr]
    work_dir = Path(str(state["work_dir"]))
    assert all(pid_alive(pid) for pid in pids) and work_dir.is_dir()

    os.kill(serve.pid, signal.SIGKILL)  # the worst case: no code of the harness runs
    serve.wait(timeout=30)
    assert wait_gone(pids, timeout=15) == []  # the kernel's parent-death signal took them along
    assert work_dir.is_dir()
    assert work_dir in sweep_stale_dirs()  # what the next start does
    assert not work_dir.exists()


def test_cluster_up_and_down_leave_no_process_and_no_directory(cluster: ControlPlane, tmp_path: Path) -> None:
    env = {**os.environ, "AGENT_ENGINE_CLUSTER_STATE": str(tmp_path / "state.json")}

    def controlplane(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tests.cluster.controlplane", command],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    up = controlplane("up")
    assert up.returncode == 0, up.stderr
    kubeconfig = up.stdout.split("export KUBECONFIG=", 1)[1].split()[0]
    state = json.loads((tmp_path / "state.json").read_text())
    nodes = subprocess.run(
        [str(cluster.bin_dir / "kubectl"), "--kubeconfig", kubeconfig, "get", "nodes", "-o", "name"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert nodes.stdout.split() == ["node/kwok-node-0"]
    assert "already running" in controlplane("up").stdout

    down = controlplane("down")  # SIGTERM to the supervisor, which stops everything itself
    assert down.returncode == 0, down.stderr
    assert wait_gone([state["pid"], *state["pids"].values()], timeout=15) == []
    assert not Path(state["work_dir"]).exists()
    assert not (tmp_path / "state.json").exists()


def test_a_port_taken_meanwhile_costs_one_retry_not_a_failure(
    cluster: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.cluster import controlplane

    real_free_ports = controlplane.free_ports
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        handed_out: list[list[int]] = []

        def first_one_taken(count: int) -> list[int]:
            ports = real_free_ports(count)
            if not handed_out:
                ports[0] = taken  # etcd's client port: etcd exits with "address already in use"
            handed_out.append(ports)
            return ports

        monkeypatch.setattr(controlplane, "free_ports", first_one_taken)
        with ControlPlane(bin_dir=cluster.bin_dir, nodes=1) as plane:
            assert len(handed_out) == 2
            with plane.api_client() as api:
                assert client.CoreV1Api(api).read_node("kwok-node-0").metadata.name == "kwok-node-0"
