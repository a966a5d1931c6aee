"""The real-node tier: the project's images as real pods on a real node of the test control plane.

One control plane for this module with a KWOK fake node and one real node (tests/cluster/realnode.py):
containerd + runc, kubelet, kube-proxy and CoreDNS in namespaces of their own, a NetworkPolicy controller
(kube-network-policies) started during the journey. Pods reach the real node only from namespaces annotated
for it, so every other cluster test stays on KWOK. The images come from images/build.sh (buildah, no Docker).

Needs root; builds what is missing first (cached: `make node-bins images` does the same ahead of time).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import realnode
from tests.cluster.controlplane import ControlPlane, ensure_binaries, wait_until
from tests.cluster.real_cluster import node_platform, real_node_plane
from tests.cluster.realnode import (
    CGROUP_PREFIX,
    NODE_LABEL,
    NODE_LABEL_VALUE,
    UNLIMITED_MEMORY,
    RealNode,
    build_images,
    missing_prerequisites,
    placement_annotations,
)
from tests.install_flow import (
    UPGRADE_EXECUTIONS,
    Kube,
    Platform,
    previous_image_refs,
    previous_release_tree,
    project_image_refs,
    run_journey,
    run_upgrade,
)

# A cold machine builds the node's binaries and the images inside the fixture.
pytestmark = pytest.mark.timeout(2400)

_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|k|M|G)?$")
_FACTORS = {None: 1, "m": 0.001, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 10**3, "M": 10**6, "G": 10**9}


def quantity(value: str | int) -> float:
    match = _QUANTITY.match(str(value))
    assert match, f"unsupported quantity {value!r}"
    return float(match.group(1)) * _FACTORS[match.group(2)]


@pytest.fixture(scope="module")
def real_cluster() -> Iterator[tuple[ControlPlane, Path]]:
    with real_node_plane() as started:
        yield started


@pytest.fixture
def node(real_cluster: tuple[ControlPlane, Path]) -> RealNode:
    assert real_cluster[0].node is not None
    return real_cluster[0].node


@pytest.fixture
def kube(real_cluster: tuple[ControlPlane, Path]) -> Kube:
    return Kube(bin_dir=real_cluster[0].bin_dir, env=real_cluster[0].env())


def check_pod_on_node(node: RealNode, pod: dict[str, Any]) -> None:
    """Every container of `pod` runs on the real node as non-root, read-only at /, with its spec's limits."""
    name = pod["metadata"]["name"]
    assert pod["spec"]["nodeName"] == node.name, (name, pod["spec"]["nodeName"])
    specs = {c["name"]: c for c in pod["spec"]["containers"]}
    statuses = pod["status"].get("containerStatuses", [])
    assert {s["name"] for s in statuses} == set(specs), (name, statuses)
    for status in statuses:
        facts = node.container_facts(status["containerID"])
        spec = specs[status["name"]]
        where = f"{name}/{status['name']} (pid {facts.pid})"
        assert all(uid != 0 for uid in facts.uids), f"{where} runs as uid {facts.uids}"
        assert all(gid != 0 for gid in facts.gids), f"{where} runs as gid {facts.gids}"
        assert facts.root_read_only, f"{where}: its root filesystem is writable"
        assert facts.no_new_privs, f"{where}: allowPrivilegeEscalation is not off"
        assert facts.capabilities_effective == 0, f"{where}: capabilities {facts.capabilities_effective:#x}"
        limits = spec.get("resources", {}).get("limits", {})
        memory = int(quantity(limits["memory"])) if "memory" in limits else UNLIMITED_MEMORY
        assert facts.memory_limit == memory, f"{where}: memory limit {facts.memory_limit}, spec {limits}"
        cpu = round(quantity(limits["cpu"]) * facts.cpu_period) if "cpu" in limits else -1
        assert facts.cpu_quota == cpu, (
            f"{where}: cpu quota {facts.cpu_quota}/{facts.cpu_period}, spec {limits}"
        )


def real_platform(plane: ControlPlane, archives: Path, node: RealNode) -> Platform:
    platform = node_platform(plane, archives, node)
    platform.pod_checks = lambda pod: check_pod_on_node(node, pod)
    return platform


def test_install_journey_on_real_pods(real_cluster: tuple[ControlPlane, Path], node: RealNode) -> None:
    """tests/install_flow.py's journey, the kind tier's, with every pod real: images loaded into containerd,
    the unchanged chart, the operator and the OE as pods with the chart's identities, the example Agent Ready,
    a tool call through the Tool Pod Service, pod checks from the node's kernel, NetworkPolicies enforced by
    kube-network-policies, upgrade, delete, uninstall."""
    plane, archives = real_cluster
    report = run_journey(real_platform(plane, archives, node))
    # Every pod the journey made ran on the real node and passed the node's checks.
    assert report["pods_checked"], report
    assert report["aer_to_tool_before_enforcement"] is True
    print(json.dumps({"node": node.phase_seconds, "images": node.loaded_images, **report}, indent=1))


def test_langgraphjs_agent_on_real_pods_holds_the_refund_and_runs_it_once(
    real_cluster: tuple[ControlPlane, Path], node: RealNode
) -> None:
    """Issue 40: examples/langgraphjs-agent (spec.runtime node, built FROM agent-engine/runtime-node) on the
    real node: its AER and Tool Pod run `node /opt/agent-engine/runner/launcher.js` as non-root, read-only
    at /, within their limits; invoked through the chart's OE, the sensitive issue_refund is held, nothing
    reaches the provider until a reviewer approves, then it runs exactly once (tests/install_flow_ts.py)."""
    from tests.install_flow_ts import run_langgraphjs_journey

    plane, archives = real_cluster
    report = run_langgraphjs_journey(real_platform(plane, archives, node))
    assert report["refund_posts"] == 1, report
    print(json.dumps(report, indent=1))


def test_upgrade_from_the_previous_release_with_work_in_flight(
    real_cluster: tuple[ControlPlane, Path], node: RealNode, tmp_path: Path
) -> None:
    """Issue 41: tests/install_flow.py's upgrade from the previous release (its commit as a git worktree,
    its images built by its own images/build.sh) to this one and back, with executions held for a reviewer
    and one in flight: the held ones are approved after the upgrade and after the rollback and complete,
    the one in flight completes or fails with a reason, the previous release's Agent still reconciles."""
    plane, archives = real_cluster
    with previous_release_tree(tmp_path) as previous:
        previous_archives = build_images(echo=True, repo=previous)
        node.load_project_images(previous_archives, previous_image_refs())
        build_images(echo=True)  # images.tsv lists this release's images again
        report = run_upgrade(real_platform(plane, archives, node), previous=previous)
    assert report["held_completed"] == UPGRADE_EXECUTIONS - 1, report
    print(json.dumps(report, indent=1))


def test_pods_choose_the_real_node_by_namespace_and_reach_services_and_dns(
    real_cluster: tuple[ControlPlane, Path], node: RealNode, kube: Kube
) -> None:
    """Beside a KWOK node: a plain namespace's pod lands on KWOK, an annotated namespace's pod on the real
    node, where it resolves cluster names and reaches the API server through the `kubernetes` Service."""
    plane, archives = real_cluster
    node.load_project_images(archives, project_image_refs()[:1])
    nodes = kube.get_json("nodes")["items"]
    real = next(n for n in nodes if n["metadata"]["name"] == node.name)
    assert real["metadata"]["labels"][NODE_LABEL] == NODE_LABEL_VALUE
    assert any(t["key"] == NODE_LABEL for t in real["spec"].get("taints", []))
    assert real["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert plane.node_names and all(n in {m["metadata"]["name"] for m in nodes} for n in plane.node_names)

    probe = (
        "import socket, ssl\n"
        "print(socket.gethostbyname('kubernetes.default.svc.cluster.local'))\n"
        "ctx = ssl.create_default_context(cafile='/var/run/secrets/kubernetes.io/serviceaccount/ca.crt')\n"
        "with socket.create_connection(('kubernetes.default.svc', 443), timeout=5) as raw:\n"
        "    with ctx.wrap_socket(raw, server_hostname='kubernetes.default.svc') as tls:\n"
        "        print(tls.version())\n"
    )
    placed = {}
    for annotated in (False, True):
        namespace = f"place-{'real' if annotated else 'fake'}-{uuid.uuid4().hex[:6]}"
        kube.kubectl("create", "namespace", namespace)
        if annotated:
            kube.kubectl(
                "annotate", "namespace", namespace, *(f"{k}={v}" for k, v in placement_annotations().items())
            )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe"},
            "spec": {
                "restartPolicy": "Never",
                "securityContext": {"runAsNonRoot": True, "runAsUser": 10001},
                "containers": [
                    {"name": "probe", "image": project_image_refs()[0], "command": ["python", "-c", probe]}
                ],
            },
        }
        kube.kubectl("apply", "--namespace", namespace, "-f", "-", stdin=json.dumps(pod))
        # KWOK keeps its pods Running; the real node runs the probe to its end.
        done = wait_until(
            f"pod {namespace}/probe {'finished' if annotated else 'scheduled'}",
            lambda namespace=namespace, annotated=annotated: _finished_or_scheduled(
                kube.get_json("pod", "probe", "--namespace", namespace), finished=annotated
            ),
            timeout=120,
            interval=0.5,
        )
        placed[annotated] = done["spec"]["nodeName"]
        if annotated:
            logs = kube.kubectl("logs", "--namespace", namespace, "probe")
            assert done["status"]["phase"] == "Succeeded", logs
            assert logs.split() == ["10.96.0.1", "TLSv1.3"], logs
        kube.kubectl("delete", "namespace", namespace, "--wait=false")
    assert placed[True] == node.name
    assert placed[False] in plane.node_names


def _finished_or_scheduled(pod: dict[str, Any], *, finished: bool) -> dict[str, Any] | None:
    if finished:
        return pod if pod["status"].get("phase") in ("Succeeded", "Failed") else None
    return pod if pod["spec"].get("nodeName") else None


def test_cluster_up_with_a_real_node_then_down_leaves_nothing(tmp_path: Path) -> None:
    """`make cluster-up REAL_NODE=1` then `make cluster-down`: no process, mount, namespace, cgroup or
    directory of the node remains (and none appeared outside the control plane's temp directory)."""
    if missing := missing_prerequisites(ensure_binaries(real_node=True)):
        pytest.skip(f"a real node needs {', '.join(missing)}")
    watched = ("/var/lib/kubelet", "/var/lib/cni", "/run/netns", "/run/containerd", "/opt/containerd",
               "/var/log/pods", "/etc/cni")  # fmt: skip
    existed = {path for path in watched if os.path.exists(path)}
    env = {**os.environ, "AGENT_ENGINE_CLUSTER_STATE": str(tmp_path / "state.json")}
    cli = [sys.executable, "-m", "tests.cluster.controlplane"]
    up = subprocess.run([*cli, "up", "--real-node"], env=env, capture_output=True, text=True, timeout=600)
    assert up.returncode == 0, up.stderr + up.stdout
    state = json.loads((tmp_path / "state.json").read_text())
    work_dir, cgroup = state["work_dir"], state["node_cgroup"]
    try:
        assert state["real_node"] and cgroup.startswith(CGROUP_PREFIX)
        assert "export KUBECONFIG=" in up.stdout and "node-selector" in up.stdout
        kubectl = [f"{state['bin_dir']}/kubectl", "--kubeconfig", state["kubeconfig"]]
        nodes = subprocess.run(
            [*kubectl, "get", "nodes", "-o", "json"], capture_output=True, text=True, check=True, timeout=60
        )
        names = {n["metadata"]["name"] for n in json.loads(nodes.stdout)["items"]}
        assert names == {state["real_node"], "kwok-node-0"}
        node_pids = list(state["node_pids"].values())
        node_netns = os.readlink(f"/proc/{state['node_pids']['node']}/ns/net")
        assert node_netns != os.readlink("/proc/self/ns/net"), "the node has a network namespace of its own"
    finally:
        down = subprocess.run([*cli, "down"], env=env, capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    time.sleep(0.5)
    assert not [p for p in _processes() if work_dir in p[1]], "processes of the node survived"
    assert not [pid for pid in node_pids if os.path.exists(f"/proc/{pid}")]
    assert work_dir not in Path("/proc/self/mountinfo").read_text()
    assert node_netns not in _net_namespaces(), "the node's network namespace survived"
    assert not list(Path("/sys/fs/cgroup").glob(f"*/{cgroup}")), "cgroups survived"
    assert not os.path.exists(work_dir)
    assert {path for path in watched if os.path.exists(path)} == existed


def _processes() -> list[tuple[int, str]]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
            except OSError:
                continue
    return out


def _net_namespaces() -> set[str]:
    """Every network namespace some process is in (by its nsfs identity)."""
    seen = set()
    for pid, _ in _processes():
        try:
            seen.add(os.readlink(f"/proc/{pid}/ns/net"))
        except OSError:
            continue
    return seen


def test_node_configuration_stays_inside_the_node(tmp_path: Path) -> None:
    """Every address the node's configuration names is loopback or inside its own network namespace, and every
    path is under its directory (so stopping it and removing the directory leaves nothing)."""
    node_dir = tmp_path / "node"
    texts = [
        realnode.containerd_config(node_dir=node_dir, pause_image="docker.io/agent-engine/node-pause:v1"),
        json.dumps(realnode.cni_config(node_dir=node_dir)),
        json.dumps(realnode.kubelet_config(node_dir=node_dir, cgroup_root="cg", ca_file=node_dir / "ca.crt")),
        json.dumps(realnode.kube_proxy_config(kubeconfig=node_dir / "kp.kubeconfig", node_name="n")),
        realnode.corefile(kubeconfig=node_dir / "coredns.kubeconfig"),
        json.dumps(realnode.egress_selector_config(node_dir / "egress.sock")),
        " ".join(realnode.apiserver_args(node_dir=node_dir, pki_dir=tmp_path / "pki")),
    ]
    inside = [ipaddress.ip_network(n) for n in ("127.0.0.0/8", realnode.POD_CIDR, realnode.SERVICE_CIDR)]
    for text in texts:
        for found in re.findall(r"\b\d+\.\d+\.\d+\.\d+(?:/\d+)?\b", text):
            network = ipaddress.ip_network(found, strict=False)
            # 0.0.0.0/0: the pods' default route, to the node's bridge inside the namespace.
            assert network == ipaddress.ip_network("0.0.0.0/0") or any(
                network.subnet_of(n) for n in inside
            ), found
        for path in re.findall(r"(?<![\w.])(/[\w./-]+)", text):
            if path.startswith(("/usr/lib/cni", "/sys/", "/proc/")) or path in ("/cg",):
                continue
            assert path.lstrip("/").startswith(str(tmp_path).lstrip("/")), f"{path}: outside the node"
    assert "restrict_oom_score_adj = true" in texts[0]
    kubelet = realnode.kubelet_config(node_dir=node_dir, cgroup_root="cg", ca_file=node_dir / "ca.crt")
    assert kubelet["failCgroupV1"] is False and kubelet["cgroupDriver"] == "cgroupfs"
    assert kubelet["registerWithTaints"] == [realnode.TAINT]
    assert set(realnode.placement_annotations()) == {
        "scheduler.alpha.kubernetes.io/node-selector",
        "scheduler.alpha.kubernetes.io/defaultTolerations",
    }
