"""The Helm chart against the real control plane: lint, schema, dry-run, install, run, uninstall."""

from __future__ import annotations

import base64
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_runtime import contract
from agent_runtime.execution_token import normalize_public_key_pem, public_key_pem
from tests.cluster.controlplane import ControlPlane
from tests.conftest import free_port
from tests.install_flow import (
    CHART,
    OUR_KINDS,
    RELEASE,
    Kube,
    StepFailed,
    apply_example,
    eventually,
    helm_install,
    helm_uninstall,
    helm_upgrade,
    helm_values_args,
    no_shared_objects,
    owned_objects,
    release_leftovers,
    wait_agent_ready,
)

NON_DEFAULT_VALUES: dict[str, str] = {
    "image.operator.repository": "registry.example.com/platform/agent-engine-operator",
    "image.operator.tag": "1.2.3",
    "image.operator.pullPolicy": "Always",
    "image.runtime.repository": "registry.example.com/platform/agent-engine-runtime",
    "image.pullSecrets[0].name": "regcred",
    "operator.replicas": "2",
    "operator.logFormat": "text",
    "operator.resources.limits.memory": "512Mi",
    "operator.nodeSelector.kubernetes\\.io/os": "linux",
    "operator.tolerations[0].key": "dedicated",
    "operator.tolerations[0].operator": "Exists",
    "operator.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
    ".matchExpressions[0].key": "kubernetes.io/arch",
    "operator.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
    ".matchExpressions[0].operator": "Exists",
    "commonLabels.team": "platform",
    "commonAnnotations.owner": "platform-team",
    "serviceAccount.annotations.example\\.com/role": "operator",
}


@pytest.fixture(scope="module")
def kube(cluster: ControlPlane) -> Kube:
    return Kube(bin_dir=cluster.bin_dir, env=cluster.env())


def _documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def test_helm_lint_is_clean_with_default_and_other_values(kube: Kube) -> None:
    for values in ({}, NON_DEFAULT_VALUES, {"operator.watchNamespaces": "{team-a,team-b}"}):
        out = kube.helm("lint", "--strict", str(CHART), *helm_values_args(values))
        assert "0 chart(s) failed" in out


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"operator.replicas": "0"}, "/operator/replicas"),
        ({"operator.logFormat": "xml"}, "/operator/logFormat"),
        ({"image.operator.repository": "Not A Repo"}, "/image/operator/repository"),
        ({"operator.watchNamespaces": "{Bad_NS}"}, "/operator/watchNamespaces/0"),
        ({"operator.unknownKnob": "1"}, "unknownKnob"),
    ],
)
def test_values_schema_rejects_wrong_values_naming_the_field(kube: Kube, values: dict, named: str) -> None:
    with pytest.raises(StepFailed) as failure:
        kube.helm("template", RELEASE, str(CHART), *helm_values_args(values))
    assert named in str(failure.value)


# Several OE replicas (their PodDisruptionBudget and spread), pinned images, the OE's NetworkPolicy values.
OE_REPLICAS_VALUES: dict[str, str] = {
    "oe.replicas": "2",
    "oe.store.type": "mongodb",
    "oe.store.mongodb.uriSecret.name": "oe-mongo",
    "image.runtime.digest": "sha256:" + "ab" * 32,
    "image.operator.repository": "registry.example.com/op@sha256:" + "cd" * 32,
    "oe.networkPolicy.clientNamespaceSelector.matchLabels.team": "web",
    "oe.networkPolicy.extraIngress[0].ports[0].port": "8080",
}


@pytest.mark.parametrize(
    "values",
    [
        {},
        NON_DEFAULT_VALUES,
        {"operator.watchNamespaces": "{dry-a,dry-b}", "operator.replicas": "3"},
        OE_REPLICAS_VALUES,
    ],
    ids=["default", "non-default", "namespaced", "oe-replicas"],
)
def test_rendered_objects_pass_server_side_dry_run(kube: Kube, values: dict[str, str]) -> None:
    namespace = f"dry-{uuid.uuid4().hex[:6]}"
    rendered = _documents(
        kube.helm(
            "template",
            RELEASE,
            str(CHART),
            "--namespace",
            namespace,
            "--include-crds",
            *helm_values_args(values),
        )
    )
    crds = [doc for doc in rendered if doc["kind"] == "CustomResourceDefinition"]
    others = [doc for doc in rendered if doc["kind"] != "CustomResourceDefinition"]
    assert {doc["metadata"]["name"] for doc in crds} >= set(OUR_KINDS)
    # CRDs for real (the peering objects need their types), namespaces for real, then the dry run.
    kube.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(crds))
    for ns in {namespace, *(doc["metadata"].get("namespace") for doc in others)} - {None}:
        kube.kubectl("create", "namespace", ns, check=False)
    out = kube.kubectl(
        "apply", "--server-side", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(others)
    )
    assert out.count("(server dry run)") == len(others)
    deployment = next(
        doc for doc in others if doc["kind"] == "Deployment" and doc["metadata"]["name"].endswith("-operator")
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    if values is NON_DEFAULT_VALUES:
        assert container["image"] == "registry.example.com/platform/agent-engine-operator:1.2.3"
        assert deployment["spec"]["replicas"] == 2
        assert deployment["metadata"]["labels"]["team"] == "platform"
    kinds = {doc["kind"] for doc in others}
    # What the server accepted above includes the hardening objects (issue 43, 27).
    assert {"NetworkPolicy", "Namespace"} <= kinds
    if values is not NON_DEFAULT_VALUES and "operator.watchNamespaces" not in values:
        assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= kinds
    if values is OE_REPLICAS_VALUES:
        assert [d["metadata"]["name"] for d in others if d["kind"] == "PodDisruptionBudget"] == [
            "agent-engine-oe"
        ]


def test_rbac_has_no_wildcards(kube: Kube) -> None:
    for values in ({}, {"operator.watchNamespaces": "{a,b}", "operator.replicas": "2"}):
        for doc in _documents(kube.helm("template", RELEASE, str(CHART), *helm_values_args(values))):
            for rule in doc.get("rules", []):
                assert "*" not in rule["verbs"] and "*" not in rule["resources"], (doc["kind"], rule)


def test_the_operator_only_reads_and_creates_secrets_and_config_maps_it_does_not_own(kube: Kube) -> None:
    """No patch on every Secret or ConfigMap (the operator no longer labels them); no delete on Secrets;
    update on Secrets only for a runtime token Secret its Agent does not own (replaced with a fresh token)."""
    for values in ({}, {"operator.watchNamespaces": "{a,b}"}):
        docs = _documents(kube.helm("template", RELEASE, str(CHART), *helm_values_args(values)))
        roles = [
            d
            for d in docs
            if d["kind"] in ("ClusterRole", "Role") and d["metadata"]["name"].endswith("-operator")
        ]
        assert roles
        for role in roles:
            verbs = {r: set(rule["verbs"]) for rule in role["rules"] for r in rule["resources"]}
            assert verbs["secrets"] == {"get", "list", "watch", "create", "update"}, role["metadata"]
            assert verbs["configmaps"] == {"get", "list", "watch", "create", "delete"}, role["metadata"]
            for child in ("deployments", "services", "serviceaccounts", "networkpolicies"):
                assert {"update", "delete"} <= verbs[child], (child, role["metadata"])


@pytest.fixture
def operator_namespace(kube: Kube) -> Iterator[str]:
    name = f"ae-system-{uuid.uuid4().hex[:6]}"
    yield name
    kube.helm("uninstall", RELEASE, "--namespace", name, check=False)
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.mark.parametrize("scope", ["namespaced", "cluster-wide"])
def test_install_then_operator_with_chart_identity_makes_example_ready_then_uninstall(
    kube: Kube,
    cluster: ControlPlane,
    cluster_namespace: str,
    operator_namespace: str,
    spawn,
    scope: str,
    tmp_path: Path,
) -> None:
    app_ns = cluster_namespace
    # Namespaced: a Role in the watched namespace; cluster-wide: the ClusterRole. Both with the chart's token.
    values = {"operator.watchNamespaces": f"{{{app_ns}}}"} if scope == "namespaced" else {}
    helm_install(kube, namespace=operator_namespace, values=values)
    deployment = kube.get_json("deployment", "agent-engine-operator", "--namespace", operator_namespace)
    pod_spec = deployment["spec"]["template"]["spec"]
    # Run the operator here, as the chart's Deployment would: its env and its ServiceAccount's token.
    sa_kubeconfig = cluster.service_account_kubeconfig(
        namespace=operator_namespace, name=pod_spec["serviceAccountName"]
    )
    env = {e["name"]: e.get("value", "") for e in pod_spec["containers"][0]["env"]}
    # The OE's public key as the chart's ConfigMap mounts it (a certificate carrying the key).
    public_key = tmp_path / "public-key.pem"
    public_key.write_text(_oe_key(kube, namespace=operator_namespace)[1])
    env["AGENT_OPERATOR_OE_PUBLIC_KEY_FILE"] = str(public_key)
    env |= {
        "KUBECONFIG": str(sa_kubeconfig),
        "AGENT_OPERATOR_LIVENESS": f"http://127.0.0.1:{free_port()}/healthz",
        "PATH": kube.env["PATH"],
        "HOME": kube.env.get("HOME", "/tmp"),
    }
    operator = spawn([sys.executable, "-m", "agent_operator"], env=env, name="operator")

    apply_example(kube, namespace=app_ns, files=("provider.yaml", "echo-agent.yaml"))
    agent = wait_agent_ready(kube, namespace=app_ns, timeout=120)
    assert agent["status"]["bundle"]["toolCount"] == 2
    # Every component mounts the OE's public key (issue 27): the AER's token opens no Tool Pod.
    shared = kube.get_json("configmap", "--namespace", app_ns, "-l", "agentengine.io/role=oe-public-key")
    assert [cm["data"][contract.OE_PUBLIC_KEY_KEY] for cm in shared["items"]] == [public_key_pem_of(env)]
    # No RBAC denial of the chart's identity (a cluster-wide operator may also meet other tests' Agents in
    # namespaces being deleted, whose writes are refused for that reason, not for RBAC).
    assert 'forbidden: user \\"system:serviceaccount' not in operator.output().lower()
    assert 'forbidden: user "system:serviceaccount' not in operator.output().lower()

    kube.kubectl("delete", "agent", "echo-agent", "--namespace", app_ns, "--wait=true")
    eventually("the Agent's objects garbage-collected", lambda: not owned_objects(kube, namespace=app_ns))
    # What it shared with the namespace's (no) other Agents goes too: the operator deletes it.
    eventually("the shared objects deleted", lambda: no_shared_objects(kube, namespace=app_ns))
    operator.stop()
    helm_uninstall(kube, namespace=operator_namespace)
    assert release_leftovers(kube, namespace=operator_namespace) == []
    # Helm keeps CRDs it installed from crds/ (its CRD policy); everything else of ours is gone.
    for crd in OUR_KINDS:
        kube.kubectl("get", "crd", crd)


def _as(cluster: ControlPlane, kube: Kube, *, namespace: str, account: str) -> Kube:
    """kubectl holding `account`'s own token, as an attacker who took it from its pod would."""
    kubeconfig = cluster.service_account_kubeconfig(namespace=namespace, name=account)
    return Kube(bin_dir=kube.bin_dir, env={**kube.env, "KUBECONFIG": str(kubeconfig)})


def test_the_chart_identities_are_refused_where_no_agent_lives(
    kube: Kube, cluster: ControlPlane, cluster_namespace: str, operator_namespace: str
) -> None:
    """Issue 43's Secrets RBAC, played with each token: the OE reads registrations and no other Secret; the
    cluster-wide operator writes nothing in kube-system or the release namespace, only registrations in
    theirs, and still writes in an Agent namespace. Then the admission policy off: RBAC alone lets it in."""
    helm_install(kube, namespace=operator_namespace)
    registrations = f"{operator_namespace}-registrations"
    operator = _as(cluster, kube, namespace=operator_namespace, account="agent-engine-operator")
    oe = _as(cluster, kube, namespace=operator_namespace, account="agent-engine-oe")

    def refused(client: Kube, *args: str) -> str:
        with pytest.raises(StepFailed) as failure:
            client.kubectl(*args)
        return str(failure.value)

    # The OE: registrations only; not the release's client token, store URI or Helm release Secrets.
    oe.kubectl("get", "secrets", "--namespace", registrations)
    for ns in (operator_namespace, cluster_namespace, "kube-system"):
        assert "forbidden" in refused(oe, "get", "secrets", "--namespace", ns).lower(), ns
    assert (
        "forbidden"
        in refused(
            oe, "get", "secret", "agent-engine-oe-client-token", "--namespace", operator_namespace
        ).lower()
    )

    # The operator: its writes where Agents live go through (server dry run: admission runs, nothing stays).
    dry = ("--dry-run=server",)
    operator.kubectl("create", "deployment", "probe", "--image=x", "--namespace", cluster_namespace, *dry)
    operator.kubectl("create", "secret", "generic", "probe", "--namespace", registrations, *dry)
    attacks = {
        "a Deployment in kube-system": ("create", "deployment", "evil", "--image=x", "-n", "kube-system"),
        "a Secret in kube-system": ("create", "secret", "generic", "evil", "-n", "kube-system"),
        "a Secret in the release namespace": (
            "create", "secret", "generic", "evil", "-n", operator_namespace,
        ),
        "a Deployment in the registrations' namespace": (
            "create", "deployment", "evil", "--image=x", "-n", registrations,
        ),
    }  # fmt: skip
    for what, args in attacks.items():
        message = eventually(
            f"{what} refused by the admission policy",
            lambda args=args: _refusal(operator, *args, *dry),
            timeout=30,
        )
        assert "no Agent lives there" in message and "operator.protectedNamespaces" in message, (
            what,
            message,
        )

    # Weakened on purpose: without the policy the same token creates a Deployment in kube-system.
    helm_upgrade(kube, namespace=operator_namespace, values={"operator.protectedNamespaces": "null"})
    eventually(
        "RBAC alone lets the operator into kube-system",
        lambda: _admitted(operator, *attacks["a Deployment in kube-system"], *dry),
        timeout=30,
    )


def _refusal(client: Kube, *args: str) -> str | None:
    """The API server's refusal of a command, or None (retried) while the policy is not loaded yet."""
    try:
        client.kubectl(*args)
    except StepFailed as failure:
        return str(failure)
    return None


def _admitted(client: Kube, *args: str) -> bool:
    return _refusal(client, *args) is None


# -- the OE's signing key (issue 27) ---------------------------------------------------------------------


def _oe_key(kube: Kube, *, namespace: str) -> tuple[str, str]:
    """The chart's OE private key (from its Secret) and the certificate carrying its public key."""
    secret = kube.get_json("secret", f"{RELEASE}-oe-signing-key", "--namespace", namespace)
    config_map = kube.get_json("configmap", f"{RELEASE}-oe-public-key", "--namespace", namespace)
    private = base64.b64decode(secret["data"][contract.OE_SIGNING_KEY_KEY]).decode()
    return private, config_map["data"][contract.OE_PUBLIC_KEY_KEY]


def public_key_pem_of(env: dict[str, str]) -> str:
    """What the operator renders for its AGENT_OPERATOR_OE_PUBLIC_KEY_FILE: the key's own PEM."""
    return normalize_public_key_pem(Path(env["AGENT_OPERATOR_OE_PUBLIC_KEY_FILE"]).read_text())


def _operator_key_annotation(kube: Kube, *, namespace: str) -> str:
    deployment = kube.get_json("deployment", "agent-engine-operator", "--namespace", namespace)
    return deployment["spec"]["template"]["metadata"]["annotations"]["agent-engine.io/oe-public-key-sha256"]


def test_the_oe_key_is_kept_across_upgrades_and_a_deleted_secret_is_a_new_key(
    kube: Kube, operator_namespace: str
) -> None:
    """Install makes the key; an upgrade keeps it and its certificate byte for byte (the operator's pod
    does not roll); deleting the Secret and upgrading makes a new key, a new certificate, and rolls the
    operator."""
    helm_install(kube, namespace=operator_namespace)
    private, certificate = _oe_key(kube, namespace=operator_namespace)
    assert normalize_public_key_pem(certificate) == public_key_pem(private)
    annotation = _operator_key_annotation(kube, namespace=operator_namespace)
    helm_upgrade(kube, namespace=operator_namespace, values={"operator.logFormat": "text"})
    assert _oe_key(kube, namespace=operator_namespace) == (private, certificate)
    assert _operator_key_annotation(kube, namespace=operator_namespace) == annotation
    # The private key is in no release value (helm stores what it rendered, not a computed value).
    values = kube.helm("get", "values", RELEASE, "--all", "--namespace", operator_namespace)
    assert "PRIVATE KEY" not in values and "oeSigningKey" not in values

    kube.kubectl("delete", "secret", f"{RELEASE}-oe-signing-key", "--namespace", operator_namespace)
    helm_upgrade(kube, namespace=operator_namespace)
    new_private, new_certificate = _oe_key(kube, namespace=operator_namespace)
    assert new_private != private and new_certificate != certificate
    assert normalize_public_key_pem(new_certificate) == public_key_pem(new_private)
    assert _operator_key_annotation(kube, namespace=operator_namespace) != annotation
