"""The OE learns Agents from registration Secrets in its own namespace, through the real Kubernetes API.

The source runs as a ServiceAccount whose Role allows only get/list/watch on Secrets in that namespace, with
a TokenRequest token and the control plane's CA, exactly as it would in a pod.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from agent_runtime.oe.registration import REGISTRATION_KEY, REGISTRATION_LABEL
from agent_runtime.oe.registry import KubernetesSecretSource, Registry, _ApiError
from tests.cluster.controlplane import ControlPlane

LOGGER = "agent_runtime.oe.registry"
SA = "oe"


@dataclass(frozen=True)
class Credentials:
    token_path: Path
    ca_path: Path


def _token(name: str) -> str:
    return f"tok-{name}-" + name[0] * 40


def _registration(agent: str, token: str, **extra: Any) -> dict[str, Any]:
    return {
        "agent": agent,
        "token": token,
        "aerUrl": "http://127.0.0.1:8001",
        "toolUrl": "http://127.0.0.1:8002",
        **extra,
    }


def _secret(name: str, document: dict[str, Any], *, labelled: bool = True) -> client.V1Secret:
    labels = {REGISTRATION_LABEL: "true"} if labelled else {"app": "something-else"}
    encoded = base64.b64encode(json.dumps(document).encode()).decode()
    return client.V1Secret(
        metadata=client.V1ObjectMeta(name=name, labels=labels), data={REGISTRATION_KEY: encoded}
    )


@pytest.fixture
def oe_credentials(cluster: ControlPlane, cluster_namespace: str, tmp_path: Path) -> Credentials:
    """A ServiceAccount that may only get, list and watch Secrets in the namespace; its token and the CA."""
    with cluster.api_client() as api:
        rbac = client.RbacAuthorizationV1Api(api)
        rbac.create_namespaced_role(
            cluster_namespace,
            client.V1Role(
                metadata=client.V1ObjectMeta(name="oe-registrations"),
                rules=[
                    client.V1PolicyRule(
                        api_groups=[""], resources=["secrets"], verbs=["get", "list", "watch"]
                    )
                ],
            ),
        )
        rbac.create_namespaced_role_binding(
            cluster_namespace,
            client.V1RoleBinding(
                metadata=client.V1ObjectMeta(name="oe-registrations"),
                role_ref=client.V1RoleRef(
                    api_group="rbac.authorization.k8s.io", kind="Role", name="oe-registrations"
                ),
                subjects=[client.RbacV1Subject(kind="ServiceAccount", name=SA, namespace=cluster_namespace)],
            ),
        )
    kubeconfig = yaml.safe_load(
        cluster.service_account_kubeconfig(
            namespace=cluster_namespace, name=SA, path=tmp_path / "sa.kubeconfig"
        ).read_text()
    )
    token_path, ca_path = tmp_path / "token", tmp_path / "ca.crt"
    token_path.write_text(kubeconfig["users"][0]["user"]["token"])
    ca_path.write_bytes(base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]))
    return Credentials(token_path=token_path, ca_path=ca_path)


def _source(cluster: ControlPlane, namespace: str, credentials: Credentials) -> KubernetesSecretSource:
    return KubernetesSecretSource(
        api_url=cluster.server,
        namespace=namespace,
        token_path=credentials.token_path,
        ca_path=credentials.ca_path,
        # No grace period: a replaced token stops working at once (rotation with grace: test_token_rotation).
        registry=Registry(grace_s=0),
        backoff_initial_s=0.2,
    )


async def _eventually(what: str, check: Callable[[], bool], *, within: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.05)


def _agent_of(registry: Registry, token: str) -> str | None:
    found = registry.by_token(token)
    return found.agent if found is not None else None


def test_registration_secrets_are_listed_watched_updated_and_deleted(
    cluster: ControlPlane,
    cluster_namespace: str,
    oe_credentials: Credentials,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    ns = cluster_namespace
    source = _source(cluster, ns, oe_credentials)
    registry = source.registry
    a, b, a2, bad, plain = (_token(n) for n in ("alpha", "bravo", "again", "xray", "plain"))

    with cluster.api_client() as api:
        core = client.CoreV1Api(api)

        async def call(fn: Callable[..., Any], *args: Any) -> Any:
            return await asyncio.to_thread(fn, *args)

        async def scenario() -> None:
            # Before the source starts: found by the initial list.
            await call(core.create_namespaced_secret, ns, _secret("reg-a", _registration(f"{ns}/agent-a", a)))
            task = asyncio.create_task(source.run())
            try:
                await _eventually(
                    "the listed registration", lambda: _agent_of(registry, a) == f"{ns}/agent-a"
                )
                assert source.synced

                # After: found by the watch.
                await call(
                    core.create_namespaced_secret, ns, _secret("reg-b", _registration(f"{ns}/agent-b", b))
                )
                await _eventually(
                    "the watched registration", lambda: registry.get(f"{ns}/agent-b") is not None
                )
                assert registry.agents == (f"{ns}/agent-a", f"{ns}/agent-b")

                # A new token replaces the old one.
                await call(
                    core.replace_namespaced_secret,
                    "reg-a",
                    ns,
                    _secret("reg-a", _registration(f"{ns}/agent-a", a2)),
                )
                await _eventually("the rotated token", lambda: _agent_of(registry, a2) == f"{ns}/agent-a")
                assert registry.by_token(a) is None

                await call(core.delete_namespaced_secret, "reg-b", ns)
                await _eventually("the deletion", lambda: registry.get(f"{ns}/agent-b") is None)

                # Malformed: logged by name and field, never with its token; nothing else changes.
                broken = _registration(f"{ns}/agent-x", bad, aerUrl="not a url")
                await call(core.create_namespaced_secret, ns, _secret("reg-broken", broken))
                await _eventually("the skip log line", lambda: "reg-broken" in caplog.text)
                assert "aerUrl" in caplog.text
                assert registry.get(f"{ns}/agent-x") is None

                # Unlabelled: ignored. The labelled Secret created after it shows the watch got that far.
                unlabelled = _secret("plain", _registration(f"{ns}/agent-p", plain), labelled=False)
                await call(core.create_namespaced_secret, ns, unlabelled)
                await call(
                    core.create_namespaced_secret, ns, _secret("reg-c", _registration(f"{ns}/agent-c", b))
                )
                await _eventually(
                    "the marker registration", lambda: registry.get(f"{ns}/agent-c") is not None
                )
                assert registry.get(f"{ns}/agent-p") is None and registry.by_token(plain) is None

                # Removing the label takes the registration out of service.
                await call(
                    core.patch_namespaced_secret,
                    "reg-c",
                    ns,
                    {"metadata": {"labels": {REGISTRATION_LABEL: None}}},
                )
                await _eventually(
                    "the unlabelled registration gone", lambda: registry.get(f"{ns}/agent-c") is None
                )
                assert registry.agents == (f"{ns}/agent-a",)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

        asyncio.run(scenario())

    for secret in (a, b, a2, bad, plain):
        assert secret not in caplog.text


def test_the_service_account_reads_no_other_namespace(
    cluster: ControlPlane, cluster_namespace: str, oe_credentials: Credentials
) -> None:
    source = _source(cluster, "default", oe_credentials)
    refresh: Callable[[], Awaitable[None]] = source.refresh
    with pytest.raises(_ApiError, match="403"):
        asyncio.run(refresh())
    assert not source.synced
