"""The operator's login as users have it (issue 22), against the real control plane.

The operator runs as a process with the chart's ServiceAccount and RBAC, but authenticates the way a
platform engineer's kubeconfig would make it: through an `exec` credential plugin (tests/exec_credential.py
prints an ExecCredential for a token of that ServiceAccount, as `aws eks get-token` would), or through a
`tokenFile` the kubelet rotates. Each token is bound to a Secret: deleting the Secret makes the API server
refuse the token with 401 at once, exactly as it refuses one that expired (TokenRequest tokens live at least
ten minutes, too long to wait for in a test).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.cluster.controlplane import ControlPlane
from tests.cluster.kubeconfig import write_kubeconfig
from tests.cluster.operator_harness import Api, apply_all, chart_identity, manifests, ready, wait_for
from tests.exec_credential import exec_user
from tests.mounted_secret import mount_secret_key


def _identity(cluster: ControlPlane, namespace: str) -> tuple[dict[str, Any], str]:
    """The chart's identity for the operator, as a kubeconfig document, and its ServiceAccount's name."""
    path = chart_identity(cluster, namespace=namespace, release=f"ae-{namespace}")
    document = yaml.safe_load(path.read_text())
    account = document["users"][0]["name"].rsplit(":", 1)[1]
    return document, account


def _bound_token(cluster: ControlPlane, *, namespace: str, account: str, bound_to: str) -> str:
    """A token of the ServiceAccount that works until the Secret `bound_to` is deleted."""
    from kubernetes import client

    with cluster.api_client() as admin:
        core = client.CoreV1Api(admin)
        secret = core.create_namespaced_secret(
            namespace, client.V1Secret(metadata=client.V1ObjectMeta(name=bound_to))
        )
        reference = client.V1BoundObjectReference(
            api_version="v1", kind="Secret", name=bound_to, uid=secret.metadata.uid
        )
        spec = client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600, bound_object_ref=reference)
        request = client.AuthenticationV1TokenRequest(spec=spec)
        return str(core.create_namespaced_service_account_token(account, namespace, request).status.token)


def _revoke(cluster: ControlPlane, *, namespace: str, bound_to: str, token: str) -> None:
    """Delete the token's Secret, then wait until the API server refuses the token."""
    from kubernetes import client

    with cluster.api_client() as admin:
        client.CoreV1Api(admin).delete_namespaced_secret(bound_to, namespace)

    def refused() -> bool:
        response = httpx.get(
            f"{cluster.server}/api/v1/namespaces/{namespace}/secrets",
            headers={"Authorization": f"Bearer {token}"},
            verify=False,  # noqa: S501 - only the status matters; no data is read
            timeout=10,
        )
        return response.status_code == 401

    wait_for("the revoked token to be refused", refused, timeout=30)


def _kubeconfig(document: dict[str, Any], user: dict[str, Any], path: Path) -> Path:
    changed = copy.deepcopy(document)
    changed["users"][0]["user"] = user
    return write_kubeconfig(path, changed)


def _second_agent(objs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    agent = copy.deepcopy(objs["agent"])
    agent["metadata"]["name"] = "bot2"
    return agent


def test_an_exec_plugin_kubeconfig_logs_in_and_logs_in_again_on_401(
    cluster: ControlPlane, cluster_namespace: str, api: Api, start_operator: Any, tmp_path: Path
) -> None:
    document, account = _identity(cluster, cluster_namespace)
    ns = cluster_namespace
    # The first two logins (the operator's client at start-up, then kopf's) get a token already revoked:
    # each one's first request is a 401, and each logs in again.
    stale = _bound_token(cluster, namespace=ns, account=account, bound_to="login-stale")
    _revoke(cluster, namespace=ns, bound_to="login-stale", token=stale)
    first = _bound_token(cluster, namespace=ns, account=account, bound_to="login-first")
    token_file, calls = tmp_path / "plugin-token", tmp_path / "plugin-calls"
    token_file.write_text(first)
    Path(f"{token_file}.first").write_text(f"{stale}\n{stale}\n")
    kubeconfig = _kubeconfig(
        document, exec_user(token_file=token_file, calls_file=calls), tmp_path / "exec.kubeconfig"
    )

    operator = start_operator(extra_env={"KUBECONFIG": str(kubeconfig)})
    objs = manifests(ns)
    apply_all(api, objs)
    ready(api)
    output = operator.process.output()
    assert "logged in through the kubernetes client library" in output and "exec credential plugin" in output
    assert "Re-authentication has finished" in output  # kopf's own login again, after the stale token's 401
    assert "logged in again after a 401" in output  # the operator's client, after the stale token's 401
    logins = len(calls.read_text().splitlines())
    assert logins >= 4  # a stale and a good login each for kopf and for the operator's client

    # The token now in use expires (here: is revoked); the plugin would print a fresh one.
    second = _bound_token(cluster, namespace=ns, account=account, bound_to="login-second")
    token_file.write_text(second)
    _revoke(cluster, namespace=ns, bound_to="login-first", token=first)
    started = time.monotonic()
    api.must_apply(_second_agent(objs))  # reconciled only if the operator's client logs in again
    ready(api, "bot2")
    elapsed = time.monotonic() - started
    print(f"measured: a new Agent Ready after its operator's token was revoked: {elapsed:.2f}s")
    output = operator.process.output()
    assert output.count("logged in again after a 401") >= 2
    assert len(calls.read_text().splitlines()) > logins
    for token in (stale, first, second):
        assert token not in output


def test_a_rotated_token_file_keeps_the_light_path_working(
    cluster: ControlPlane, cluster_namespace: str, api: Api, start_operator: Any, tmp_path: Path
) -> None:
    document, account = _identity(cluster, cluster_namespace)
    ns = cluster_namespace
    first = _bound_token(cluster, namespace=ns, account=account, bound_to="file-first")
    token_file = mount_secret_key(tmp_path / "sa", first)  # as the kubelet projects a ServiceAccount token
    kubeconfig = _kubeconfig(document, {"tokenFile": str(token_file)}, tmp_path / "file.kubeconfig")

    operator = start_operator(extra_env={"KUBECONFIG": str(kubeconfig)})
    objs = manifests(ns)
    apply_all(api, objs)
    ready(api)

    # The kubelet writes a new token, then the old one expires (here: is revoked).
    second = _bound_token(cluster, namespace=ns, account=account, bound_to="file-second")
    mount_secret_key(tmp_path / "sa", second)
    time.sleep(1.5)  # the operator's client looks at the file at most once a second
    _revoke(cluster, namespace=ns, bound_to="file-first", token=first)
    api.must_apply(_second_agent(objs))
    ready(api, "bot2")
    output = operator.process.output()
    assert "API token file changed" in output
    assert "kubernetes client library" not in output  # the light path: no client library for a token file
    assert "logged in again after a 401" not in output  # the new file was read before the old token died
    for token in (first, second):
        assert token not in output
