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
        ({"pricing": {"models": {"m": {"input": -1, "output": 1}}}}, "spec.pricing.models.m.input"),
        ({"pricing": {"models": {"m": {"input": 1}}}}, "spec.pricing.models.m.output"),
        # agentRefs (issue 38): one tool name for two Agents, and a name that is no Agent name.
        (
            {"agentRefs": [{"name": "a", "tool": "ask"}, {"name": "b", "tool": "ask"}]},
            "two agentRefs give the same tool name",
        ),
        ({"agentRefs": [{"name": "Not_An_Agent"}]}, "spec.agentRefs[0].name"),
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


def _create(cluster: ControlPlane, namespace: str, body: dict[str, object]) -> dict[str, object]:
    with cluster.api_client() as admin:
        return client.CustomObjectsApi(admin).create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, body
        )


def _refused(cluster: ControlPlane, namespace: str, body: dict[str, object]) -> str:
    with pytest.raises(ApiException) as refused:
        _create(cluster, namespace, body)
    assert refused.value.status == 422, refused.value.body
    return str(refused.value.body)


@pytest.mark.parametrize("component", ["aer", "tool", "memory"])
@pytest.mark.parametrize(
    ("requests", "limits"),
    [
        ({"memory": "1Gi"}, {"memory": "512Mi"}),
        ({"cpu": 2}, {"cpu": "1500m"}),  # an integer against a string quantity
        ({"cpu": "100m", "memory": "1.5Gi"}, {"cpu": "1", "memory": "1536M"}),  # 1.5Gi > 1536M
    ],
)
def test_a_request_above_its_limit_is_refused_at_admission_naming_the_component(
    cluster: ControlPlane,
    cluster_namespace: str,
    crds: None,
    component: str,
    requests: dict[str, object],
    limits: dict[str, object],
) -> None:
    """Before issue 43 the CRD admitted these; the AER then ran while the Tool Pod was refused forever."""
    spec: dict[str, object] = {"resources": {"requests": requests, "limits": limits}}
    if component == "memory":
        spec["enabled"] = True
    body = _refused(cluster, cluster_namespace, _agent("greedy", components={component: spec}))
    assert f"spec.components.{component}.resources" in body
    assert "resources.requests must not exceed resources.limits" in body


def test_requests_at_or_below_their_limits_and_partial_resources_are_admitted(
    cluster: ControlPlane, cluster_namespace: str, crds: None
) -> None:
    same = {"cpu": "1", "memory": "1Gi"}
    components = {
        "aer": {"resources": {"requests": same, "limits": {"cpu": "1000m", "memory": "1024Mi"}}},
        "tool": {"resources": {"requests": {"memory": "2Gi"}}},  # the limit comes from the platform
        "memory": {"enabled": True, "resources": {"limits": {"cpu": 2}}},
    }
    stored = _create(cluster, cluster_namespace, _agent("fits", components=components))
    assert stored["spec"]["components"]["tool"]["resources"] == {"requests": {"memory": "2Gi"}}


def test_sqlite_memory_with_several_pods_is_refused_mongodb_and_a_disabled_memory_are_not(
    cluster: ControlPlane, cluster_namespace: str, crds: None
) -> None:
    """Before issue 43 the CRD admitted it and each Memory pod kept its own file."""
    body = _refused(
        cluster,
        cluster_namespace,
        _agent("forgetful", components={"memory": {"enabled": True, "replicas": 2}}),
    )
    assert "spec.components.memory.replicas" in body and "each Memory pod keeps its own file" in body
    mongodb = {"type": "mongodb", "uriSecretRef": {"name": "db", "key": "uri"}}
    _create(
        cluster,
        cluster_namespace,
        _agent("shared", components={"memory": {"enabled": True, "replicas": 3, "store": mongodb}}),
    )
    _create(cluster, cluster_namespace, _agent("off", components={"memory": {"replicas": 2}}))


def test_topology_spread_is_stored_with_its_defaults_and_explained(
    cluster: ControlPlane, cluster_namespace: str, crds: None
) -> None:
    zone = {"topologyKey": "topology.kubernetes.io/zone"}
    stored = _create(
        cluster,
        cluster_namespace,
        _agent("spread", components={"aer": {"replicas": 3, "topologySpreadConstraints": [zone]}}),
    )
    (rule,) = stored["spec"]["components"]["aer"]["topologySpreadConstraints"]
    assert rule == {**zone, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}
    bad = {"topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "Sometimes"}
    body = _refused(
        cluster, cluster_namespace, _agent("bad", components={"tool": {"topologySpreadConstraints": [bad]}})
    )
    assert "spec.components.tool.topologySpreadConstraints[0].whenUnsatisfiable" in body
    explained = cluster.kubectl("explain", "agents.spec.components.memory.topologySpreadConstraints").stdout
    assert "across nodes" in " ".join(explained.split())  # kubectl wraps descriptions


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"onExceed": "suspend", "onLimit": "queue", "maxConcurrentExecutions": 2}, None),
        ({"onExceed": "fail", "onLimit": "reject"}, None),
        ({"onExceed": "pause"}, "spec.limits.onExceed"),
        ({"onLimit": "wait"}, "spec.limits.onLimit"),
    ],
)
def test_limits_on_exceed_suspend_and_on_limit_queue_are_admitted_other_values_refused(
    cluster: ControlPlane,
    cluster_namespace: str,
    crds: None,
    limits: dict[str, object],
    field: str | None,
) -> None:
    name = f"limits-{abs(hash(str(sorted(limits.items())))) % 10**8}"
    with cluster.api_client() as admin:
        custom = client.CustomObjectsApi(admin)
        if field is None:
            stored = custom.create_namespaced_custom_object(
                GROUP, VERSION, cluster_namespace, PLURAL, _agent(name, limits=limits)
            )
            assert {key: stored["spec"]["limits"][key] for key in limits} == limits
            return
        with pytest.raises(ApiException) as refused:
            custom.create_namespaced_custom_object(
                GROUP, VERSION, cluster_namespace, PLURAL, _agent(name, limits=limits)
            )
    assert refused.value.status == 422
    assert field in refused.value.body
