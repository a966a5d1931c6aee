"""`spec.knowledge` (issue 37) as the real API server enforces it: exactly one of a ConfigMap or a Secret."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.controlplane import ControlPlane

GROUP, VERSION, PLURAL = "agentengine.io", "v1alpha1", "agents"


def _agent(name: str, knowledge: list[dict[str, str]]) -> dict[str, object]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Agent",
        "metadata": {"name": name},
        "spec": {"entrypoint": "pkg.mod:app", "knowledge": knowledge},
    }


@pytest.mark.parametrize(
    ("knowledge", "message"),
    [
        (
            [{"name": "kb", "configMapName": "a", "secretName": "b"}],
            "exactly one of configMapName or secretName",
        ),
        ([{"name": "kb"}], "exactly one of configMapName or secretName"),
        ([{"name": "Bad_Name", "configMapName": "a"}], "spec.knowledge[0].name"),
        # knowledge-<name> is the Tool Pod's volume name, which Kubernetes caps at 63 characters.
        ([{"name": "k" * 54, "configMapName": "a"}], "spec.knowledge[0].name"),
        ([{"name": "kb", "configMapName": "a"}, {"name": "kb", "secretName": "b"}], "Duplicate value"),
    ],
)
def test_bad_knowledge_entries_are_refused_naming_the_field(
    cluster: ControlPlane, cluster_namespace: str, crds: None, knowledge: list[dict[str, str]], message: str
) -> None:
    with cluster.api_client() as admin:
        custom = client.CustomObjectsApi(admin)
        with pytest.raises(ApiException) as refused:
            custom.create_namespaced_custom_object(
                GROUP, VERSION, cluster_namespace, PLURAL, _agent("bad", knowledge)
            )
    assert refused.value.status == 422
    assert message in refused.value.body


def test_a_configmap_and_a_secret_entry_are_stored(
    cluster: ControlPlane, cluster_namespace: str, crds: None
) -> None:
    knowledge = [
        {"name": "handbook", "configMapName": "team-handbook"},
        {"name": "legal", "secretName": "docs"},
    ]
    with cluster.api_client() as admin:
        custom = client.CustomObjectsApi(admin)
        stored = custom.create_namespaced_custom_object(
            GROUP, VERSION, cluster_namespace, PLURAL, _agent("ok", knowledge)
        )
    assert stored["spec"]["knowledge"] == knowledge
