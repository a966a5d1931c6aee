"""The Kubernetes API as a connector (examples/kubernetes-api), live against the test control plane.

The control plane's own /openapi/v3 documents are fetched with a ServiceAccount token and compiled; the
example's tool.yaml, pointed at this server, then lists, creates, reads and patches a ConfigMap through
the executor on both paths, with that token and the cluster CA from the namespace's kube-root-ca.crt.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.connectors import (
    ConnectorExecutor,
    ToolResponse,
    compile_catalog,
    load_catalog_text,
    load_tool_yaml,
    materialize_connector,
)
from tests.cluster.controlplane import REPO_ROOT, ControlPlane, wait_until

EXAMPLE = REPO_ROOT / "examples" / "kubernetes-api"
SA = "agent-k8s"
# What the example exposes must be exactly what the README's Role allows.
EXPOSED = {
    "kubernetes_listCoreV1NamespacedConfigMap",
    "kubernetes_readCoreV1NamespacedConfigMap",
    "kubernetes_createCoreV1NamespacedConfigMap",
    "kubernetes_patchCoreV1NamespacedConfigMap",
}


def _serviceaccount(cluster: ControlPlane, namespace: str) -> tuple[str, str]:
    """The README's steps: a ServiceAccount allowed get/list/create/patch on ConfigMaps; its token and CA."""
    cluster.kubectl("-n", namespace, "create", "serviceaccount", SA)
    cluster.kubectl(
        "-n",
        namespace,
        "create",
        "role",
        "configmap-editor",
        "--verb=get,list,create,patch",
        "--resource=configmaps",
    )
    cluster.kubectl(
        "-n",
        namespace,
        "create",
        "rolebinding",
        "agent-k8s-configmaps",
        "--role=configmap-editor",
        f"--serviceaccount={namespace}:{SA}",
    )
    token = cluster.kubectl("-n", namespace, "create", "token", SA).stdout.strip()
    # The controller-manager publishes the cluster CA into every namespace (root-ca-cert-publisher).
    ca = wait_until(
        f"ConfigMap {namespace}/kube-root-ca.crt",
        lambda: (
            cluster.kubectl(
                "-n",
                namespace,
                "get",
                "configmap",
                "kube-root-ca.crt",
                "-o",
                r"jsonpath={.data.ca\.crt}",
                check=False,
            ).stdout
        ),
        interval=0.1,
    )
    return token, ca


def _documents(cluster: ControlPlane, *, token: str, ca: str) -> dict[str, Any]:
    """Every OpenAPI v3 document the server lists, fetched as the ServiceAccount (discovery is public)."""
    verify = ssl.create_default_context(cadata=ca)
    headers = {"authorization": f"Bearer {token}"}
    with httpx.Client(base_url=cluster.server, verify=verify, headers=headers, trust_env=False) as http:
        index = http.get("/openapi/v3").raise_for_status().json()
        return {
            name: http.get(entry["serverRelativeURL"]).raise_for_status().json()
            for name, entry in index["paths"].items()
            if name == "api/v1" or (name.startswith("apis/") and name.count("/") == 2)  # group versions
        }


class _Calls:
    """One executor called through `execute` (httpx) or `aexecute` (aiohttp, on one event loop)."""

    def __init__(self, executor: ConnectorExecutor, mode: str, env: dict[str, str]) -> None:
        self._executor, self._env = executor, env
        self._runner = asyncio.Runner() if mode == "async" else None

    def __call__(self, tool: str, **arguments: Any) -> ToolResponse:
        if self._runner is None:
            return self._executor.execute(tool, arguments, env=self._env)
        return self._runner.run(self._executor.aexecute(tool, arguments, env=self._env))

    def close(self) -> None:
        if self._runner is None:
            self._executor.close()
        else:
            self._runner.run(self._executor.aclose())
            self._runner.close()


def test_every_served_document_compiles_without_media_type_skips(
    cluster: ControlPlane, cluster_namespace: str
) -> None:
    token, ca = _serviceaccount(cluster, cluster_namespace)
    documents = _documents(cluster, token=token, ca=ca)
    assert "api/v1" in documents and len(documents) > 10
    compiled = skipped = 0
    for name, document in documents.items():
        catalog = compile_catalog(document, connector_name="k8s")
        compiled += len(catalog.tools)
        skipped += len(catalog.skipped)
        assert catalog.skipped == [], (name, [s.reason for s in catalog.skipped[:3]])
        # CRD groups other tests installed are served without security schemes; the built-in ones have it.
        if document.get("info", {}).get("title") != "Kubernetes CRD Swagger":
            assert catalog.auth is not None and catalog.auth.prefix == "Bearer ", name
        patch_media = {t.body.media_type for t in catalog.tools if t.method == "PATCH" and t.body is not None}
        assert patch_media <= {"application/merge-patch+json"}, (name, patch_media)
    operations = sum(
        1
        for document in documents.values()
        for item in document["paths"].values()
        for method in ("get", "put", "post", "delete", "options", "head", "patch")
        if method in item
    )
    assert compiled == operations > 700 and skipped == 0  # every operation a tool: ~30% were skipped before
    core = compile_catalog(documents["api/v1"], connector_name="k8s")
    create = next(t for t in core.tools if t.operation_id == "createCoreV1NamespacedConfigMap")
    assert create.body is not None and create.body.media_type == "application/json"
    assert "sent as JSON (the API declares */*)" in create.description


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_example_connector_lists_creates_reads_and_patches_a_configmap(
    cluster: ControlPlane, cluster_namespace: str, tmp_path: Path, mode: str
) -> None:
    namespace = cluster_namespace
    token, ca = _serviceaccount(cluster, namespace)
    documents = _documents(cluster, token=token, ca=ca)
    # The example as a user lays it out: tool.yaml, with the fetched document beside it.
    shutil.copy(EXAMPLE / "tool.yaml", tmp_path / "tool.yaml")
    (tmp_path / "openapi.json").write_text(json.dumps(documents["api/v1"]))
    tool = load_tool_yaml(tmp_path / "tool.yaml")
    tool = tool.model_copy(update={"source": tool.source.model_copy(update={"base_url": cluster.server})})
    catalog = load_catalog_text((tmp_path / tool.tool_defs).read_text(), connector_name=tool.name)
    connector = materialize_connector(tool, catalog)
    assert {t.name for t in connector.tools} == EXPOSED
    assert connector.tls is not None and connector.tls.ca_env == "K8S_CA"

    # The CA reaches the executor as the environment variable tool.yaml names; the token per call.
    call = _Calls(ConnectorExecutor(connector, env={"K8S_CA": ca}), mode, {"K8S_TOKEN": token})
    name = f"made-by-agent-{uuid.uuid4().hex[:6]}"
    try:
        listed = call("kubernetes_listCoreV1NamespacedConfigMap", namespace=namespace)
        assert listed.status_code == 200 and listed.body["kind"] == "ConfigMapList"
        assert "kube-root-ca.crt" in [item["metadata"]["name"] for item in listed.body["items"]]

        created = call(
            "kubernetes_createCoreV1NamespacedConfigMap",
            namespace=namespace,
            apiVersion="v1",
            kind="ConfigMap",
            metadata={"name": name, "labels": {"made-by": "connector"}},
            data={"greeting": "hello"},
        )
        assert created.status_code == 201, created.body
        assert created.body["metadata"]["namespace"] == namespace

        read = call("kubernetes_readCoreV1NamespacedConfigMap", namespace=namespace, name=name)
        assert read.status_code == 200 and read.body["data"] == {"greeting": "hello"}
        assert read.body["metadata"]["labels"] == {"made-by": "connector"}

        patched = call(
            "kubernetes_patchCoreV1NamespacedConfigMap",
            namespace=namespace,
            name=name,
            body={"data": {"greeting": None, "farewell": "bye"}},
        )
        assert patched.status_code == 200, patched.body
        again = call("kubernetes_readCoreV1NamespacedConfigMap", namespace=namespace, name=name)
        assert again.body["data"] == {"farewell": "bye"}  # merge patch: null removes a key

        # The Role allows nothing else: the token is the ServiceAccount's, not an admin's.
        with pytest.raises(httpx.HTTPStatusError) as forbidden:
            call("kubernetes_listCoreV1NamespacedConfigMap", namespace="default")
        assert forbidden.value.response.status_code == 403
        assert token not in str(forbidden.value) and token not in forbidden.value.response.text
    finally:
        call.close()
