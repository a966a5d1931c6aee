"""The Agent CRD's tool policy and model endpoint, as the real API server enforces and explains them."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.controlplane import ControlPlane

GROUP, VERSION, PLURAL = "agentengine.io", "v1alpha1", "agents"


def _agent(name: str, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Agent",
        "metadata": {"name": name},
        "spec": {"entrypoint": "pkg.mod:app", **spec},
    }


KEY = {"name": "OPENAI_API_KEY", "secretKeyRef": {"name": "llm", "key": "key"}}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"tools": {"allow": ["a", "b"], "deny": ["b"]}}, "both allowed and denied"),
        ({"tools": {"requireApproval": ["x"], "deny": ["x"]}}, "cannot also require approval"),
        ({"tools": {"sensitive": "sometimes"}}, "spec.tools.sensitive"),
        (
            {"llm": {"baseUrl": "https://m.example/v1", "apiKeyEnv": "OTHER", "credentials": [KEY]}},
            "apiKeyEnv",
        ),
        ({"llm": {"model": "m"}}, "needs llm.baseUrl"),
        ({"llm": {"baseUrl": "ftp://m.example"}}, "spec.llm.baseUrl"),
    ],
)
def test_contradictions_are_refused_naming_the_field(
    cluster: ControlPlane, cluster_namespace: str, crds: None, spec: dict[str, object], message: str
) -> None:
    with cluster.api_client() as admin:
        custom = client.CustomObjectsApi(admin)
        with pytest.raises(ApiException) as refused:
            custom.create_namespaced_custom_object(
                GROUP, VERSION, cluster_namespace, PLURAL, _agent("bad", **spec)
            )
    assert refused.value.status == 422
    assert message in refused.value.body


def test_a_valid_policy_and_endpoint_are_stored_with_defaults_and_explained(
    cluster: ControlPlane, cluster_namespace: str, crds: None
) -> None:
    spec = {
        "tools": {"allow": ["echo_*", "invoke_llm"], "requireApproval": ["echo_create*"]},
        "llm": {"baseUrl": "https://m.example/v1", "model": "m", "credentials": [KEY]},
    }
    with cluster.api_client() as admin:
        custom = client.CustomObjectsApi(admin)
        stored = custom.create_namespaced_custom_object(
            GROUP, VERSION, cluster_namespace, PLURAL, _agent("ok", **spec)
        )
    assert stored["spec"]["tools"]["sensitive"] == "approve"
    explained = cluster.kubectl("explain", "agents.spec.tools.requireApproval").stdout
    assert "wait for a human" in explained


def _connector(name: str, *, base_url: str, tls: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Connector",
        "metadata": {"name": name},
        "spec": {
            "source": {"type": "openapi", "baseUrl": base_url},
            "catalog": {"configMapKeyRef": {"name": "doc", "key": "openapi.yaml"}},
            "tls": tls,
        },
    }


CA = {"caConfigMapKeyRef": {"name": "ca", "key": "ca.crt"}}


@pytest.mark.parametrize(
    ("base_url", "tls", "message"),
    [
        ("https://api.internal", {**CA, "caSecretKeyRef": {"name": "ca", "key": "ca.crt"}}, "exactly one"),
        ("https://api.internal", {}, "exactly one"),
        ("http://api.internal", CA, "https"),
    ],
)
def test_connector_tls_names_exactly_one_ca_for_an_https_api(
    cluster: ControlPlane,
    cluster_namespace: str,
    crds: None,
    base_url: str,
    tls: dict[str, object],
    message: str,
) -> None:
    with cluster.api_client() as admin:
        custom = client.CustomObjectsApi(admin)
        with pytest.raises(ApiException) as refused:
            custom.create_namespaced_custom_object(
                GROUP, VERSION, cluster_namespace, "connectors", _connector("bad", base_url=base_url, tls=tls)
            )
        assert refused.value.status == 422 and message in refused.value.body
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            cluster_namespace,
            "connectors",
            _connector("good", base_url="https://api.internal", tls=CA),
        )
