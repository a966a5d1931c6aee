"""The operator under test: admin reads for assertions, the example manifests, and the operator as a process
running with the Helm chart's own identity (its ServiceAccount, Role and discovery ClusterRole).

Fixtures (registered by tests/cluster/conftest.py):

crds            the Agent and Connector CRDs, applied once per module
api             admin HTTP access to the test's namespace
start_operator  `python -m agent_operator` limited to the namespace, authenticated as the chart's
                ServiceAccount with exactly the RBAC the chart renders
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cluster.controlplane import ControlPlane
from tests.conftest import REPO_ROOT, Process, free_port, wait_for_port

GROUP, VERSION = "agentengine.io", "v1alpha1"
CRDS = [
    REPO_ROOT / "crds" / "agentengine.io_agents.yaml",
    REPO_ROOT / "crds" / "agentengine.io_connectors.yaml",
]
MANAGED = {
    "agents",
    "connectors",
    "configmaps",
    "secrets",
    "services",
    "serviceaccounts",
    "networkpolicies",
    "deployments",
    "poddisruptionbudgets",
}

OPENAPI = {
    "openapi": "3.0.3",
    "info": {"title": "Petstore", "version": "1"},
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "summary": "List pets",
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/pets/{id}": {
            "get": {
                "operationId": "getPet",
                "summary": "Get a pet",
                "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "ok"}},
            }
        },
    },
}


def openapi_text(**info: str) -> str:
    doc = json.loads(json.dumps(OPENAPI))
    doc["info"].update(info)
    return json.dumps(doc)


def wait_for(what: str, check: Callable[[], Any], *, timeout: float = 60.0, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


@dataclass
class Api:
    """Admin reads and writes for the assertions (the operator has its own client)."""

    cluster: ControlPlane
    namespace: str
    http: httpx.Client

    @classmethod
    def connect(cls, cluster: ControlPlane, namespace: str) -> Api:
        config = yaml.safe_load(cluster.kubeconfig.read_text())
        user = config["users"][0]["user"]
        cluster_cfg = config["clusters"][0]["cluster"]
        tmp = cluster.work_dir / f"operator-test-{namespace}"
        tmp.mkdir(exist_ok=True)
        paths = {}
        for key, field in (
            ("ca", "certificate-authority-data"),
            ("cert", "client-certificate-data"),
            ("key", "client-key-data"),
        ):
            src = cluster_cfg if key == "ca" else user
            path = tmp / key
            path.write_bytes(base64.b64decode(src[field]))
            paths[key] = str(path)
        tls = ssl.create_default_context(cafile=paths["ca"])
        tls.load_cert_chain(paths["cert"], paths["key"])
        http = httpx.Client(base_url=cluster.server, verify=tls, timeout=30)
        return cls(cluster=cluster, namespace=namespace, http=http)

    def path(self, kind: str, name: str = "", *, sub: str = "") -> str:
        group = {
            "agents": f"/apis/{GROUP}/{VERSION}",
            "connectors": f"/apis/{GROUP}/{VERSION}",
            "deployments": "/apis/apps/v1",
            "replicasets": "/apis/apps/v1",
            "networkpolicies": "/apis/networking.k8s.io/v1",
            "poddisruptionbudgets": "/apis/policy/v1",
        }.get(kind, "/api/v1")
        out = f"{group}/namespaces/{self.namespace}/{kind}"
        return out + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        response = self.http.get(self.path(kind, name))
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return response.json()

    def list(self, kind: str, selector: str | None = None) -> list[dict[str, Any]]:
        response = self.http.get(self.path(kind), params={"labelSelector": selector} if selector else None)
        response.raise_for_status()
        return response.json()["items"]

    def apply(self, manifest: dict[str, Any]) -> httpx.Response:
        kind = manifest["kind"].lower() + "s"
        return self.http.patch(
            self.path(kind, manifest["metadata"]["name"]),
            params={"fieldManager": "test", "force": "true"},
            content=json.dumps(manifest),
            headers={"Content-Type": "application/apply-patch+yaml"},
        )

    def must_apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        response = self.apply(manifest)
        assert response.is_success, response.text
        return response.json()

    def delete(self, kind: str, name: str) -> None:
        self.http.delete(self.path(kind, name), params={"propagationPolicy": "Background"})

    def condition(self, agent: str, kind: str = "Ready") -> dict[str, Any]:
        body = self.get("agents", agent) or {}
        return next((c for c in (body.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.list("events") if e["involvedObject"]["name"] == name]

    def server_writes(self) -> int:
        """Write requests the API server has served for the resources the operator manages (all clients)."""
        total = 0
        for line in self.http.get("/metrics").text.splitlines():
            if not line.startswith("apiserver_request_total{"):
                continue
            labels = dict(
                part.split("=", 1) for part in line[line.index("{") + 1 : line.index("}")].split(",")
            )
            labels = {k: v.strip('"') for k, v in labels.items()}
            if (
                labels.get("verb") in {"POST", "PUT", "PATCH", "APPLY", "DELETE", "CREATE", "UPDATE"}
                and labels.get("resource") in MANAGED
                and labels.get("subresource", "") in ("", "status")
                and not (labels.get("resource") == "deployments" and labels.get("subresource") == "status")
            ):
                total += int(float(line.rsplit(" ", 1)[1]))
        return total


def manifests(namespace: str, *, catalog: str | None = None) -> dict[str, dict[str, Any]]:
    return {
        "catalog": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "petstore-openapi", "namespace": namespace},
            "data": {"openapi.json": catalog or openapi_text()},
        },
        "creds": {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "petstore-creds", "namespace": namespace},
            "stringData": {"token": "provider-token-value"},
        },
        "llm": {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "llm-keys", "namespace": namespace},
            "stringData": {"openai": "llm-key-value"},
        },
        "connector": {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Connector",
            "metadata": {"name": "petstore", "namespace": namespace},
            "spec": {
                "source": {"baseUrl": "https://petstore.example.com/v1"},
                "catalog": {"configMapKeyRef": {"name": "petstore-openapi", "key": "openapi.json"}},
                "expose": {"allow": ["listPets", "getPet"]},
                "auth": {
                    "type": "bearer",
                    "env": "PETSTORE_TOKEN",
                    "secretKeyRef": {"name": "petstore-creds", "key": "token"},
                },
            },
        },
        "agent": {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Agent",
            "metadata": {"name": "bot", "namespace": namespace},
            "spec": {
                "image": "registry.example.com/team/bot:1.0.0",
                "entrypoint": "bot.app:app",
                "connectors": ["petstore"],
                "llm": {
                    "credentials": [
                        {"name": "OPENAI_API_KEY", "secretKeyRef": {"name": "llm-keys", "key": "openai"}}
                    ]
                },
            },
        },
    }


@dataclass
class RunningOperator:
    process: Process
    liveness: str
    pid: int = 0

    def log_lines(self) -> list[dict[str, Any]]:
        """The operator's JSON log lines (anything else is skipped)."""
        lines = []
        for line in self.process.output().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                lines.append(record)
        return lines

    def writes(self, namespace: str | None = None) -> int:
        """Write requests the operator logged (only those into `namespace`, when given)."""
        where = f"/namespaces/{namespace}/" if namespace else ""
        return sum(
            1 for line in self.process.output().splitlines() if '"api write"' in line and where in line
        )


@pytest.fixture(scope="module")
def crds(cluster: ControlPlane) -> None:
    for crd in CRDS:
        cluster.kubectl("apply", "--server-side", "-f", str(crd))
    for crd in ("agents", "connectors"):
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd}.{GROUP}", "--timeout=60s")


@pytest.fixture
def api(cluster: ControlPlane, cluster_namespace: str, crds: None) -> Iterator[Api]:
    client = Api.connect(cluster, cluster_namespace)
    yield client
    client.http.close()


CHART = REPO_ROOT / "charts" / "agent-engine"
# The registrations' namespace too: the chart's Roles for the OE and the operator live there.
IDENTITY_KINDS = ("Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")


def chart_identity(
    cluster: ControlPlane, *, namespace: str, release: str, values: dict[str, str] | None = None
) -> Path:
    """Apply the ServiceAccount and RBAC the chart renders for an operator watching `namespace` (and
    nothing else of the chart); return a kubeconfig authenticating as that ServiceAccount."""
    settings = {"operator.watchNamespaces": f"{{{namespace}}}", **(values or {})}
    args = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    rendered = subprocess.run(
        [str(cluster.bin_dir / "helm"), "template", release, str(CHART), "--namespace", namespace, *args],
        env=cluster.env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    rendered_docs = [doc for doc in yaml.safe_load_all(rendered) if doc]
    docs = sorted(
        (doc for doc in rendered_docs if doc["kind"] in IDENTITY_KINDS),
        key=lambda doc: doc["kind"] != "Namespace",  # a namespace before the Roles in it
    )
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(docs))
    operator = next(
        doc
        for doc in rendered_docs
        if doc["kind"] == "Deployment" and doc["metadata"]["name"].endswith("-operator")
    )
    account = operator["spec"]["template"]["spec"]["serviceAccountName"]
    return cluster.service_account_kubeconfig(namespace=namespace, name=account)


@pytest.fixture
def start_operator(
    cluster: ControlPlane, cluster_namespace: str, spawn: Callable[..., Process]
) -> Iterator[Callable[..., RunningOperator]]:
    """The operator as the chart's ServiceAccount: a Role in the namespace, the discovery ClusterRole."""
    release = f"ae-{cluster_namespace}"
    identities: dict[tuple[tuple[str, str], ...], Path] = {}

    def start(
        *,
        resync_seconds: float = 0,
        extra_env: dict[str, str] | None = None,
        chart_values: dict[str, str] | None = None,
    ) -> RunningOperator:
        # Once per set of values: a restart must not write (the zero-write test counts server writes).
        wanted = tuple(sorted((chart_values or {}).items()))
        if wanted not in identities:
            identities[wanted] = chart_identity(
                cluster, namespace=cluster_namespace, release=release, values=chart_values
            )
        kubeconfig = identities[wanted]
        port = free_port()
        env = cluster.env()
        env.update(
            {
                "KUBECONFIG": str(kubeconfig),
                "AGENT_OPERATOR_NAMESPACES": cluster_namespace,
                "AGENT_OPERATOR_LIVENESS": f"http://127.0.0.1:{port}/healthz",
                "AGENT_OPERATOR_RESYNC_SECONDS": str(resync_seconds),
                "PYTHONPATH": str(REPO_ROOT),
                **(extra_env or {}),
            }
        )
        proc = spawn([sys.executable, "-m", "agent_operator"], env=env, name="operator")
        wait_for_port("127.0.0.1", port, timeout=30, proc=proc.popen)
        return RunningOperator(process=proc, liveness=f"http://127.0.0.1:{port}/healthz", pid=proc.popen.pid)

    yield start
    # Cluster-scoped RBAC (and the registrations' namespace) outlive the namespace: remove this release's.
    cluster.kubectl(
        "delete", "clusterroles,clusterrolebindings,namespaces",
        "-l", f"app.kubernetes.io/instance={release}", "--wait=false", check=False,
    )  # fmt: skip


def apply_all(api: Api, objs: dict[str, dict[str, Any]]) -> None:
    for key in ("catalog", "creds", "llm", "connector", "agent"):
        api.must_apply(objs[key])


def ready(api: Api, agent: str = "bot") -> dict[str, Any]:
    return wait_for(
        f"Agent {agent} Ready",
        lambda: api.condition(agent).get("status") == "True" and api.get("agents", agent),
    )


def terminating_namespaces(api: Api) -> list[str]:
    items = api.http.get("/api/v1/namespaces").json()["items"]
    return [ns["metadata"]["name"] for ns in items if ns.get("status", {}).get("phase") == "Terminating"]


def mounted_bundles(api: Api, deployment: str) -> list[str]:
    body = api.get("deployments", deployment) or {}
    volumes = body["spec"]["template"]["spec"]["volumes"]
    bundle = next(v for v in volumes if v["name"] == "bundle")
    return [s["configMap"]["name"] for s in bundle["projected"]["sources"]]
