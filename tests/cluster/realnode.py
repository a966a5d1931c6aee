"""One real node for the test control plane: containerd + runc, kubelet, kube-proxy, CoreDNS and a CNI bridge.

`ControlPlane(real_node=True)` (tests/cluster/controlplane.py) starts one next to its KWOK fake nodes; so does
`make cluster-up REAL_NODE=1`. The binaries come from `tests/cluster/build_bins.sh --real-node` (kubelet and
kube-proxy from the control plane's own wrapper module, CoreDNS, kube-network-policies and a pause program,
all built with `go` from the Go module proxy; containerd, runc, the CNI plugins and socat from Debian).

Layout (every address is on loopback or inside the node's own network namespace):

    host netns                               node: own PID, mount and network namespace (realnode_init.py)
    kube-apiserver 127.0.0.1:P  <-- socat <-- apiserver.sock <-- socat 0.0.0.0:P  <-- kubelet, kube-proxy,
                                                                 (lo, 10.244.0.1)     CoreDNS, pods (Service
                                                                                      10.96.0.1:443 -> :P)
    kube-apiserver egress "cluster" --> egress.sock --> HTTP CONNECT proxy --> kubelet 10.244.0.1:10250
                                                      bridge cni0 10.244.0.1/24: the node IP, the pods'
                                                      gateway, CoreDNS on :53

The node is labelled and tainted `agentengine.io/node=real`, so only pods that ask for it land on it: a
namespace annotated with `placement_annotations()` (the API server's PodNodeSelector and
PodTolerationRestriction admission plugins add the selector and toleration to every pod in it) or a pod with
that nodeSelector and toleration. Everything else stays on KWOK's fake nodes.

Images: `load_images()` imports docker-archives (images/build.sh writes them) into the node's containerd.
With `network_policies=True` the node enforces NetworkPolicies from the start with kube-router's NetworkPolicy
controller (iptables and ipsets in the node's network namespace; its router and service proxy off);
`enable_network_policies()` starts it later. (SIG Network's kube-network-policies was tried first: it runs,
but cannot program its rules here, since this kernel has no nftables `queue` expression: CONFIG_NFT_QUEUE.)

Nothing outlives `stop()`: the node's PID namespace dies with its first process (the kernel kills shims and
pods), its mount and network namespaces with the last one, the kubelet's cgroups are removed, and the node's
directory goes with the control plane's temp directory. A node whose harness was SIGKILLed dies the same way
(parent-death signals down to the PID namespace); `sweep_stale_cgroups()` removes its cgroups later.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tests.cluster import pki
from tests.cluster.kubeconfig import kubeconfig_document, write_kubeconfig
from tests.cluster.processes import Child, pid_alive, start_child, stop_all

if TYPE_CHECKING:
    from tests.cluster.controlplane import ControlPlane

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE_BINARIES = ("kubelet", "kube-proxy", "coredns", "kube-router", "pause")
NODE_IMAGES = ("images/pause.tar",)
NODE_LABEL = "agentengine.io/node"
NODE_LABEL_VALUE = "real"
TAINT = {"key": NODE_LABEL, "value": NODE_LABEL_VALUE, "effect": "NoSchedule"}
TOLERATION = {"key": NODE_LABEL, "operator": "Equal", "value": NODE_LABEL_VALUE, "effect": "NoSchedule"}
# Inside the node's own network namespace only; nothing on the host routes there.
NODE_IP = "10.244.0.1"
POD_CIDR = "10.244.0.0/24"
SERVICE_CIDR = "10.96.0.0/16"
BRIDGE = "cni0"
CGROUP_PREFIX = "agent-engine-node-"
PAUSE_IMAGE = "docker.io/agent-engine/node-pause:{k8s}"
KUBE_ROUTER_USER = "agent-engine-test:kube-router"
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class RealNodeError(RuntimeError):
    """The real node could not start; the message carries the node's logs."""


def placement_annotations() -> dict[str, str]:
    """Namespace annotations that put every pod of the namespace on the real node."""
    return {
        "scheduler.alpha.kubernetes.io/node-selector": f"{NODE_LABEL}={NODE_LABEL_VALUE}",
        "scheduler.alpha.kubernetes.io/defaultTolerations": json.dumps([TOLERATION]),
    }


def missing_prerequisites(bin_dir: Path) -> list[str]:
    """What this machine lacks to run a real node (empty when it can)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (namespaces, mounts, cgroups)")
    for name in NODE_BINARIES:
        if not (bin_dir / name).exists():
            missing.append(f"{bin_dir / name} (make node-bins)")
    for tool in (
        "containerd",
        "containerd-shim-runc-v2",
        "runc",
        "ctr",
        "socat",
        "unshare",
        "ip",
        "iptables",
        "ipset",
    ):
        if not any((Path(d) / tool).exists() for d in PATH_ENV.split(":")):
            missing.append(f"{tool} (make node-bins installs it)")
    if not Path("/usr/lib/cni/bridge").exists():
        missing.append("/usr/lib/cni/bridge (containernetworking-plugins)")
    return missing


def project_image_archives(archive_dir: Path) -> dict[str, Path]:
    """The images images/build.sh exported: {reference: docker-archive}, from its images.tsv."""
    index = archive_dir / "images.tsv"
    if not index.exists():
        raise RealNodeError(f"{index} is missing: run `make images`")
    pairs = (line.split("\t") for line in index.read_text().splitlines() if line.strip())
    return {ref: Path(path) for ref, path in pairs}


# ---------------------------------------------------------------------------------------------- cgroups


def cgroup_mounts() -> list[Path]:
    """Every cgroup (v1) and cgroup2 mount point of this machine."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].split()[0] in ("cgroup", "cgroup2"):
            points.append(Path(fields[0].split()[4]))
    return points


def make_cgroup_root(name: str) -> None:
    for mount in cgroup_mounts():
        path = mount / name
        path.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):  # a new v1 cpuset holds no CPU until told which
            if (path / knob).exists() and not (path / knob).read_text().strip():
                (path / knob).write_text((mount / knob).read_text())


def remove_cgroup_tree(name: str, *, timeout: float = 10.0) -> list[Path]:
    """rmdir the cgroup `name` and everything under it in every hierarchy; return what is left."""
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for mount in cgroup_mounts():
            root = mount / name
            if not root.exists():
                continue
            for dirpath, _, _ in sorted(os.walk(root), key=lambda entry: -len(entry[0])):
                with contextlib.suppress(OSError):
                    os.rmdir(dirpath)
            if root.exists():
                left.append(root)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def sweep_stale_cgroups() -> list[str]:
    """Remove the cgroups of nodes whose harness process is gone (it was SIGKILLed)."""
    removed = set()
    for mount in cgroup_mounts():
        for path in mount.glob(f"{CGROUP_PREFIX}*"):
            owner = path.name[len(CGROUP_PREFIX) :].split("-", 1)[0]
            if owner.isdigit() and not pid_alive(int(owner)):
                remove_cgroup_tree(path.name, timeout=2.0)
                removed.add(path.name)
    return sorted(removed)


# --------------------------------------------------------------------------------------- configurations


def containerd_config(*, node_dir: Path, pause_image: str) -> str:
    """Debian's containerd 1.6: every path under the node directory, the CRI settings that work here."""
    root, state = node_dir / "containerd" / "root", node_dir / "containerd" / "state"
    return f"""version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{node_dir / "containerd.sock"}"

[debug]
  level = "warn"

[plugins."io.containerd.internal.v1.opt"]
  path = "{node_dir / "containerd" / "opt"}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  # Without it every pod fails: runc cannot lower the sandbox's oom_score_adj below the node's.
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{node_dir / "cni" / "net.d"}"
"""


def cni_config(*, node_dir: Path) -> dict[str, Any]:
    """The bridge the node IP lives on, pods on it with host-local addresses and a default route to it."""
    return {
        "cniVersion": "1.0.0",
        "name": "agent-engine-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(node_dir / "cni" / "ipam"),
                    "ranges": [[{"subnet": POD_CIDR, "rangeStart": "10.244.0.10", "gateway": NODE_IP}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            }
        ],
    }


def kubelet_config(*, node_dir: Path, cgroup_root: str, ca_file: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{node_dir / 'containerd.sock'}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{cgroup_root}",
        "failCgroupV1": False,  # this machine mounts cgroup v1 controllers (hybrid layout)
        "failSwapOn": False,
        "clusterDNS": [NODE_IP],
        "clusterDomain": "cluster.local",
        "resolvConf": "",  # pods learn the cluster's DNS only, not the host's
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "readOnlyPort": 0,
        "podLogsDir": str(node_dir / "pod-logs"),
        "volumePluginDir": str(node_dir / "kubelet" / "volume-plugins"),
        "registerWithTaints": [TAINT],
        # Images are loaded, never pulled: keep them all; evict only when the machine is really short.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "50Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "serializeImagePulls": False,
        "nodeStatusUpdateFrequency": "5s",
        "syncFrequency": "10s",
        "shutdownGracePeriod": "0s",
        "maxPods": 60,
    }


def kube_proxy_config(*, kubeconfig: Path, node_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node_name,
        "mode": "iptables",
        "clusterCIDR": POD_CIDR,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        # Source-NAT every Service connection: replies then route back through this namespace.
        "iptables": {"masqueradeAll": True, "syncPeriod": "30s", "minSyncPeriod": "0s"},
        # Leave the machine-wide conntrack settings alone (only the first network namespace may set them).
        "conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }


def corefile(*, kubeconfig: Path) -> str:
    return f""".:53 {{
    bind {NODE_IP}
    ready 127.0.0.1:8181
    errors
    cache 5
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        ttl 5
    }}
}}
"""


def egress_selector_config(socket_path: Path) -> dict[str, Any]:
    """The API server reaches nodes (kubelet logs, exec, port-forward) through the node's CONNECT proxy."""
    return {
        "apiVersion": "apiserver.k8s.io/v1beta1",
        "kind": "EgressSelectorConfiguration",
        "egressSelections": [
            {
                "name": "cluster",
                "connection": {
                    "proxyProtocol": "HTTPConnect",
                    "transport": {"uds": {"udsName": str(socket_path)}},
                },
            }
        ],
    }


def apiserver_args(*, node_dir: Path, pki_dir: Path) -> list[str]:
    """What the API server needs for a real node: node identities, node placement, a way to the kubelet."""
    return [
        "--enable-admission-plugins=NodeRestriction,PodNodeSelector,PodTolerationRestriction",
        f"--egress-selector-config-file={node_dir / 'egress-selector.yaml'}",
        # The node IP, not the node's name (which nothing resolves), as kind does.
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        f"--kubelet-client-certificate={pki_dir / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki_dir / 'apiserver-kubelet-client.key'}",
    ]


def addon_objects(*, node_name: str, apiserver_port: int, volumes: list[Path]) -> list[dict[str, Any]]:
    """What a cluster installer would add for this node: the API server's endpoint, CoreDNS's read access,
    and a few local PersistentVolumes on the node (the chart's OE keeps its SQLite store on one)."""
    labels = {
        "kubernetes.io/service-name": "kubernetes",
        "endpointslice.kubernetes.io/managed-by": "agent-engine-test",
    }
    objects: list[dict[str, Any]] = [
        # The API server runs with --endpoint-reconciler-type=none: point `kubernetes` at the node's relay.
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [NODE_IP], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": apiserver_port, "protocol": "TCP"}],
        },
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {
                "name": "kubernetes",
                "namespace": "default",
                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
            },
            "subsets": [
                {"addresses": [{"ip": NODE_IP}], "ports": [{"name": "https", "port": apiserver_port}]}
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "agent-engine-test:coredns"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["list", "watch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "agent-engine-test:coredns"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "agent-engine-test:coredns",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "agent-engine-test:coredns"}
            ],
        },
    ]
    for index, path in enumerate(volumes):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"{node_name}-local-{index}", "labels": {NODE_LABEL: NODE_LABEL_VALUE}},
                "spec": {
                    "capacity": {"storage": "2Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "volumeMode": "Filesystem",
                    "local": {"path": str(path)},
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/hostname",
                                            "operator": "In",
                                            "values": [node_name],
                                        }
                                    ]
                                }
                            ]
                        }
                    },
                },
            }
        )
    return objects


def kube_router_objects() -> list[dict[str, Any]]:
    """What kube-router's NetworkPolicy controller reads (as its own deployment's ClusterRole, read-only)."""
    name = KUBE_ROUTER_USER
    read = ["get", "list", "watch"]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["namespaces", "pods", "services", "nodes", "endpoints"],
                    "verbs": read,
                },
                {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": read},
                {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": read},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}],
        },
    ]


# ------------------------------------------------------------------------------------------------- node

# cgroup v1 reports "no limit" as the largest page-aligned value, not a keyword.
UNLIMITED_MEMORY = 2**63 - 4096


@dataclass(frozen=True)
class ContainerFacts:
    pid: int
    uids: tuple[int, ...]  # real, effective, saved, filesystem
    gids: tuple[int, ...]
    root_read_only: bool
    no_new_privs: bool
    capabilities_effective: int
    memory_limit: int  # bytes; UNLIMITED_MEMORY when none
    cpu_quota: int  # microseconds per period; -1 when none
    cpu_period: int


def _proc_status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def build_images(*, echo: bool = False, repo: Path = REPO_ROOT) -> Path:
    """Run `repo`'s images/build.sh (a no-op when every image is current); return the archive directory,
    whose images.tsv then lists that tree's images."""
    proc = subprocess.run(
        ["bash", str(repo / "images" / "build.sh")],
        stdout=subprocess.PIPE,
        stderr=None if echo else subprocess.PIPE,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RealNodeError(f"images/build.sh exited {proc.returncode}\n{(proc.stderr or '')[-6000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


@dataclass(eq=False)
class RealNode:
    """A real node of `plane`, started by `start()` once the control plane serves, stopped by `stop()`."""

    plane: ControlPlane
    name: str = "real-node"
    network_policies: bool = False
    dir: Path = field(init=False)
    cgroup_root: str = field(init=False)
    children: list[Child] = field(init=False, default_factory=list)
    startup_seconds: float = field(init=False, default=0.0)
    phase_seconds: dict[str, float] = field(init=False, default_factory=dict)
    loaded_images: dict[str, float] = field(init=False, default_factory=dict)
    _stopped: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.dir = self.plane.work_dir / "node"
        self.cgroup_root = f"{CGROUP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"

    @property
    def bin_dir(self) -> Path:
        return self.plane.bin_dir

    @property
    def socket(self) -> Path:
        return self.dir / "containerd.sock"

    # -- before the API server starts

    def prepare(self, pki_dir: Path) -> list[str]:
        """Write the egress selector file and the API server's kubelet client certificate; return the API
        server's extra arguments. Called by the control plane before it starts its API server."""
        self.dir.mkdir(mode=0o700)
        (self.dir / "egress-selector.yaml").write_text(
            yaml.safe_dump(egress_selector_config(self.dir / "egress.sock"))
        )
        pair = pki.issue(
            self.plane.ca,
            common_name="kube-apiserver-kubelet-client",
            organizations=("system:masters",),
            client=True,
        )
        pki.write_pair(pair, pki_dir, "apiserver-kubelet-client")
        return apiserver_args(node_dir=self.dir, pki_dir=pki_dir)

    # -- lifecycle

    def start(self, *, timeout: float = 180.0) -> RealNode:
        began = time.monotonic()
        sweep_stale_cgroups()
        try:
            self._start(deadline=began + timeout)
        except Exception as error:
            logs = self.log_tails()
            self.stop()
            raise RealNodeError(f"the real node did not start: {error}\n{logs}") from error
        self.startup_seconds = time.monotonic() - began
        return self

    def _phase(self, name: str, began: float) -> None:
        self.phase_seconds[name] = round(time.monotonic() - began, 2)

    def _start(self, *, deadline: float) -> None:
        began = time.monotonic()
        plan = self._write_files()
        make_cgroup_root(self.cgroup_root)
        self.plane.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(self._addons()))
        self.children.append(
            start_child(
                "node-apiserver-relay",
                ["socat", f"UNIX-LISTEN:{self.dir / 'apiserver.sock'},fork,mode=600",
                 f"TCP:127.0.0.1:{self.plane.apiserver_port}"],
                log_dir=self.dir / "logs",
            )
        )  # fmt: skip
        self.children.append(
            start_child(
                "node",
                ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--propagation", "private",
                 "--mount-proc", "--net", "--",
                 sys.executable, "-m", "tests.cluster.realnode_init", str(plan)],
                log_dir=self.dir / "logs",
                cwd=REPO_ROOT,
                env={**os.environ, "PATH": PATH_ENV, "PYTHONPATH": str(REPO_ROOT)},
            )
        )  # fmt: skip
        self._wait("containerd", deadline, lambda: "containerd" in self._state().get("started", []))
        self._phase("containerd", began)
        for archive in NODE_IMAGES:
            self._import(self.bin_dir / archive)
        self._phase("node images", began)
        self._wait("the node's processes", deadline, lambda: self._state().get("ready"))
        self._phase("kubelet, kube-proxy, CoreDNS", began)
        self._wait("the node Ready", deadline, self._node_ready)
        self._phase("node Ready", began)
        if self.network_policies:
            self.enable_network_policies(timeout=max(10.0, deadline - time.monotonic()))
            self._phase("network policies", began)

    def enable_network_policies(self, *, timeout: float = 90.0) -> None:
        """Start kube-router's NetworkPolicy controller on the node; wait until it serves its health port."""
        self.plane.kubectl(
            "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(kube_router_objects())
        )
        (self.dir / "start").mkdir(exist_ok=True)
        (self.dir / "start" / "kube-router").touch()
        deadline = time.monotonic() + timeout
        self._wait("kube-router", deadline, lambda: "kube-router" in self._state().get("started", []))
        self.network_policies = True

    def restart(self, name: str, *, timeout: float = 120.0) -> None:
        """SIGKILL one of the node's processes (`kubelet`, say: its pods keep running under containerd) and
        start it again; returns once it is ready and the node is Ready."""
        before = self._state().get("restarts", {}).get(name, 0)
        (self.dir / "restart").mkdir(exist_ok=True)
        (self.dir / "restart" / name).touch()
        deadline = time.monotonic() + timeout
        self._wait(
            f"{name} restarted", deadline, lambda: self._state().get("restarts", {}).get(name, 0) > before
        )
        self._wait("the node Ready", deadline, self._node_ready)

    def stop(self) -> None:
        """Stop the node: its PID namespace (and every process in it) first, then the host relay; remove its
        cgroups. Idempotent; the directory goes with the control plane's."""
        if self._stopped:
            return
        self._stopped = True
        stop_all([c for c in self.children if c.name == "node"], grace=15.0)
        stop_all(self.children, grace=2.0)
        left = remove_cgroup_tree(self.cgroup_root)
        if left:
            print(f"real node: cgroups still busy: {left}", file=sys.stderr)

    # -- images

    def load_images(self, archives: Iterable[Path]) -> dict[str, float]:
        """Import docker-archives into the node's containerd; return seconds per archive."""
        for archive in archives:
            self._import(Path(archive))
        return self.loaded_images

    def load_project_images(self, archive_dir: Path, refs: Iterable[str]) -> dict[str, float]:
        """Import the named images (images/build.sh's archives) unless the node has them already."""
        archives = project_image_archives(archive_dir)
        have = set(self.images())
        wanted = [ref for ref in refs if f"docker.io/{ref}" not in have]
        missing = [ref for ref in wanted if ref not in archives]
        if missing:
            raise RealNodeError(f"no archive for {missing} in {archive_dir}: run `make images`")
        return self.load_images(archives[ref] for ref in wanted)

    def _import(self, archive: Path) -> None:
        began = time.monotonic()
        proc = subprocess.run(
            ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", "images", "import", str(archive)],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        if proc.returncode != 0:
            raise RealNodeError(
                f"ctr images import {archive} exited {proc.returncode}: {proc.stderr}{proc.stdout}"
            )
        self.loaded_images[archive.name] = round(time.monotonic() - began, 2)

    def images(self) -> list[str]:
        out = subprocess.run(
            ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", "images", "ls", "-q"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        return [line for line in out.splitlines() if line and not line.startswith("sha256:")]

    # -- what the node's kernel says about a container

    def container_cgroup(self, container_id: str, controller: str) -> Path:
        """The cgroup directory of a container (`containerd://<id>` or the bare id) in one v1 controller."""
        bare = container_id.split("://", 1)[-1]
        root = Path("/sys/fs/cgroup") / controller / self.cgroup_root
        found = [path for path in root.rglob(bare) if path.is_dir()]
        if len(found) != 1:
            raise RealNodeError(f"container {bare}: {len(found)} cgroups under {root}")
        return found[0]

    def container_pids(self, container_id: str) -> list[int]:
        procs = self.container_cgroup(container_id, "pids") / "cgroup.procs"
        return [int(pid) for pid in procs.read_text().split()]

    def container_facts(self, container_id: str) -> ContainerFacts:
        """What the kernel says about a running container: its first process's user and root mount, and
        the limits its cgroups enforce."""
        main = None
        for pid in self.container_pids(container_id):
            status = _proc_status(pid)
            if status.get("NSpid", "").split()[-1:] == ["1"]:  # PID 1 of the container's own namespace
                main = pid
                break
        if main is None:
            raise RealNodeError(f"container {container_id}: no process is its PID 1")
        status = _proc_status(main)
        root_options = next(
            line.split()[5].split(",")
            for line in Path(f"/proc/{main}/mountinfo").read_text().splitlines()
            if line.split()[4] == "/"
        )
        memory = self.container_cgroup(container_id, "memory")
        cpu = self.container_cgroup(container_id, "cpu")
        return ContainerFacts(
            pid=main,
            uids=tuple(int(u) for u in status["Uid"].split()),
            gids=tuple(int(g) for g in status["Gid"].split()),
            root_read_only="ro" in root_options,
            no_new_privs=status.get("NoNewPrivs") == "1",
            capabilities_effective=int(status["CapEff"], 16),
            memory_limit=int((memory / "memory.limit_in_bytes").read_text()),
            cpu_quota=int((cpu / "cpu.cfs_quota_us").read_text()),
            cpu_period=int((cpu / "cpu.cfs_period_us").read_text()),
        )

    # -- internals

    def _state(self) -> dict[str, Any]:
        try:
            state = json.loads((self.dir / "state.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        if state.get("error") or state.get("failed"):
            raise RealNodeError(f"node failed: {state.get('error') or state.get('failed')}")
        return state

    def _wait(self, what: str, deadline: float, ready: Any) -> None:
        while True:
            for child in self.children:
                if not child.alive():
                    raise RealNodeError(
                        f"{child.name} exited with {child.popen.returncode} waiting for {what}"
                    )
            with contextlib.suppress(subprocess.SubprocessError):
                if ready():
                    return
            if time.monotonic() > deadline:
                raise RealNodeError(f"timed out waiting for {what}")
            time.sleep(0.2)

    def _node_ready(self) -> bool:
        proc = self.plane.kubectl("get", "node", self.name, "-o", "json", check=False)
        if proc.returncode != 0:
            return False
        conditions = json.loads(proc.stdout).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def _addons(self) -> list[dict[str, Any]]:
        volumes = [self.dir / "volumes" / f"local-{i}" for i in range(3)]
        for path in volumes:
            path.mkdir(parents=True, exist_ok=True)
        return addon_objects(node_name=self.name, apiserver_port=self.plane.apiserver_port, volumes=volumes)

    def _write_files(self) -> Path:
        d = self.dir
        for sub in ("logs", "pki", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "containerd"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        ca = self.plane.ca
        (d / "pki" / "ca.crt").write_bytes(ca.cert_pem)
        server = f"https://127.0.0.1:{self.plane.apiserver_port}"
        identities = {
            "kubelet": (f"system:node:{self.name}", ("system:nodes",)),
            "kube-proxy": ("system:kube-proxy", ()),
            "coredns": ("agent-engine-test:coredns", ()),
            "kube-router": (KUBE_ROUTER_USER, ()),
        }
        kubeconfigs = {}
        for file_name, (user, orgs) in identities.items():
            pair = pki.issue(ca, common_name=user, organizations=orgs, client=True)
            kubeconfigs[file_name] = write_kubeconfig(
                d / f"{file_name}.kubeconfig",
                kubeconfig_document(
                    server=server,
                    ca_pem=ca.cert_pem,
                    user=user,
                    client_cert_pem=pair.cert_pem,
                    client_key_pem=pair.key_pem,
                ),
            )
        pause = PAUSE_IMAGE.format(k8s=self.plane.versions["K8S_VERSION"])
        (d / "containerd" / "config.toml").write_text(containerd_config(node_dir=d, pause_image=pause))
        (d / "cni" / "net.d" / "10-agent-engine.conflist").write_text(
            json.dumps(cni_config(node_dir=d), indent=2)
        )
        (d / "kubelet.yaml").write_text(
            yaml.safe_dump(
                kubelet_config(node_dir=d, cgroup_root=self.cgroup_root, ca_file=d / "pki" / "ca.crt")
            )
        )
        (d / "kube-proxy.yaml").write_text(
            yaml.safe_dump(kube_proxy_config(kubeconfig=kubeconfigs["kube-proxy"], node_name=self.name))
        )
        (d / "Corefile").write_text(corefile(kubeconfig=kubeconfigs["coredns"]))
        port = self.plane.apiserver_port
        b = self.bin_dir
        processes = [
            {
                "name": "apiserver-relay",
                "argv": [
                    "socat",
                    f"TCP-LISTEN:{port},fork,reuseaddr",
                    f"UNIX-CONNECT:{d / 'apiserver.sock'}",
                ],
                "ready": {"host": "127.0.0.1", "port": port},
            },
            {
                "name": "containerd",
                "argv": ["containerd", "--config", str(d / "containerd" / "config.toml")],
                "ready": {"path": str(self.socket)},
            },
            {
                "name": "kubelet",
                "argv": [
                    str(b / "kubelet"),
                    f"--config={d / 'kubelet.yaml'}",
                    f"--kubeconfig={kubeconfigs['kubelet']}",
                    f"--hostname-override={self.name}",
                    f"--node-ip={NODE_IP}",
                    f"--node-labels={NODE_LABEL}={NODE_LABEL_VALUE}",
                    f"--root-dir={d / 'kubelet'}",
                    f"--cert-dir={d / 'kubelet' / 'pki'}",
                    "--v=1",
                ],
                "ready": {"host": "127.0.0.1", "port": 10248},
                "timeout": 90,
            },
            {
                "name": "kube-proxy",
                "argv": [str(b / "kube-proxy"), f"--config={d / 'kube-proxy.yaml'}", "--v=1"],
                "ready": {"host": "127.0.0.1", "port": 10256},
            },
            {
                "name": "coredns",
                "argv": [str(b / "coredns"), "-conf", str(d / "Corefile")],
                "ready": {"host": NODE_IP, "port": 53},
            },
        ]
        # On request (enable_network_policies): kube-router as the node's NetworkPolicy controller only.
        kube_router = {
            "name": "kube-router",
            "argv": [
                str(b / "kube-router"),
                "--run-firewall=true",
                "--run-router=false",
                "--run-service-proxy=false",
                "--run-loadbalancer=false",
                f"--kubeconfig={kubeconfigs['kube-router']}",
                f"--hostname-override={self.name}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--health-port=20244",
                "--metrics-port=0",
                "--v=1",
            ],
            "ready": {"host": "127.0.0.1", "port": 20244},
            "env": {"PATH": PATH_ENV},
        }
        plan = {
            "node_dir": str(d),
            "tmpfs": ["/run", "/var/lib"],
            "network": {"bridge": BRIDGE, "node_ip": NODE_IP, "prefix": 24, "service_cidr": SERVICE_CIDR},
            "egress_socket": str(d / "egress.sock"),
            "egress_allow": [POD_CIDR, SERVICE_CIDR],
            "processes": [{**p, "env": {"PATH": PATH_ENV}} for p in processes],
            "on_request": {"kube-router": kube_router},
        }
        path = d / "plan.json"
        path.write_text(json.dumps(plan, indent=2))
        return path

    def log_tails(self, chars: int = 2500) -> str:
        parts = []
        for log in sorted((self.dir / "logs").glob("*.log")) if (self.dir / "logs").exists() else []:
            text = log.read_text(errors="replace")[-chars:]
            parts.append(f"----- node {log.stem} -----\n{text}")
        return "\n".join(parts)
