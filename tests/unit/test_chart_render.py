"""The chart's rendered objects (issue 43's linter findings, issue 27's OE NetworkPolicy): `helm template`
with the cached helm, then assertions on what the API server would be given."""

from __future__ import annotations

import base64
import datetime
import hashlib
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from agent_operator.render import AGENT_LABEL, COMPONENT_LABEL, labels, oe_public_key_config_map_name
from agent_operator.settings import OperatorSettings
from agent_runtime import contract
from agent_runtime.execution_token import normalize_public_key_pem, public_key_pem
from tests.cluster.controlplane import cache_root, pinned_versions

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "agent-engine"
NS = "ae-sys"
REGISTRATIONS = f"{NS}-registrations"
DIGEST = "sha256:" + "ab" * 32
MONGO = {"oe.store.type": "mongodb", "oe.store.mongodb.uriSecret.name": "oe-mongo"}


@pytest.fixture(scope="module")
def helm() -> Path:
    path = cache_root() / f"k8s-{pinned_versions()['K8S_VERSION']}" / "bin" / "helm"
    if not path.exists():
        pytest.skip(f"no helm at {path}: run `make cluster-bins`")
    return path


def _run(helm: Path, values: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    args = [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]
    return subprocess.run(
        [str(helm), "template", "agent-engine", str(CHART), "--namespace", NS, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def render(helm: Path, **values: str) -> list[dict[str, Any]]:
    proc = _run(helm, {k.replace("__", "."): v for k, v in values.items()})
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def refused(helm: Path, values: Mapping[str, str]) -> str:
    proc = _run(helm, values)
    assert proc.returncode != 0, f"{values} rendered"
    return proc.stderr


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [(d["kind"], d["metadata"]["name"]) for d in docs])
    return found[0]


def matches(selector: Mapping[str, Any], pod_labels: Mapping[str, str]) -> bool:
    """A LabelSelector's meaning (matchLabels and the In/NotIn/Exists/DoesNotExist expressions)."""
    if any(pod_labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        ok = {
            "In": key in pod_labels and pod_labels[key] in values,
            "NotIn": pod_labels.get(key) not in values,
            "Exists": key in pod_labels,
            "DoesNotExist": key not in pod_labels,
        }[op]
        if not ok:
            return False
    return True


OPERATOR = "agent-engine-operator"
OE = "agent-engine-oe"


def pod(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["spec"]


# -- readiness, rollout, /tmp ----------------------------------------------------------------------------


def test_the_operator_is_ready_only_when_its_health_endpoint_answers_and_a_rollout_waits_for_it(
    helm: Path,
) -> None:
    deployment = one(render(helm), "Deployment", OPERATOR)
    container = pod(deployment)["containers"][0]
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    # The probe reaches the endpoint the operator serves in a pod (loopback would fail every probe).
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["AGENT_OPERATOR_LIVENESS"].endswith(":8080/healthz")
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"health": 8080}
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert deployment["spec"]["minReadySeconds"] >= 5


def test_tmp_is_bounded_in_the_operator_and_oe_pods(helm: Path) -> None:
    for docs, limit in (
        (render(helm), "64Mi"),
        (render(helm, operator__tmpSizeLimit="32Mi", oe__tmpSizeLimit="32Mi"), "32Mi"),
    ):
        for name in (OPERATOR, OE):
            volumes = {v["name"]: v for v in pod(one(docs, "Deployment", name))["volumes"]}
            assert volumes["tmp"]["emptyDir"] == {"sizeLimit": limit}, name
            # The container's whole ephemeral storage (/tmp and its logs) is bounded too, above /tmp's limit.
            resources = pod(one(docs, "Deployment", name))["containers"][0]["resources"]
            assert resources["limits"]["ephemeral-storage"] == "256Mi", name
            assert resources["requests"]["ephemeral-storage"] == "64Mi", name
    assert "/oe/tmpSizeLimit" in refused(helm, {"oe.tmpSizeLimit": "lots"})


# -- disruption budgets and spread ------------------------------------------------------------------------


def test_one_replica_gets_no_budget_and_no_spread(helm: Path) -> None:
    docs = render(helm)
    assert not [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    for name in (OPERATOR, OE):
        assert "topologySpreadConstraints" not in pod(one(docs, "Deployment", name))


@pytest.mark.parametrize("name", [OPERATOR, OE])
def test_several_replicas_get_a_budget_and_a_spread_over_their_own_pods(helm: Path, name: str) -> None:
    docs = render(
        helm, operator__replicas="3", oe__replicas="2", **{k.replace(".", "__"): v for k, v in MONGO.items()}
    )
    deployment = one(docs, "Deployment", name)
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    budget = one(docs, "PodDisruptionBudget", name)
    assert budget["spec"]["maxUnavailable"] == 1
    assert matches(budget["spec"]["selector"], pod_labels)
    # Its selector picks this component's pods only, not the other one's.
    other = one(docs, "Deployment", OE if name == OPERATOR else OPERATOR)
    assert not matches(budget["spec"]["selector"], other["spec"]["template"]["metadata"]["labels"])
    (spread,) = pod(deployment)["topologySpreadConstraints"]
    assert (
        spread["topologyKey"] == "kubernetes.io/hostname" and spread["whenUnsatisfiable"] == "ScheduleAnyway"
    )
    assert matches(spread["labelSelector"], pod_labels)


def test_a_spread_value_replaces_the_default_and_a_budget_takes_min_available(helm: Path) -> None:
    docs = render(
        helm,
        operator__replicas="2",
        operator__podDisruptionBudget__maxUnavailable="null",
        operator__podDisruptionBudget__minAvailable="1",
        **{
            "operator__topologySpreadConstraints[0]__maxSkew": "1",
            "operator__topologySpreadConstraints[0]__topologyKey": "topology.kubernetes.io/zone",
            "operator__topologySpreadConstraints[0]__whenUnsatisfiable": "DoNotSchedule",
        },
    )
    assert one(docs, "PodDisruptionBudget", OPERATOR)["spec"] | {"selector": None} == {
        "minAvailable": 1,
        "selector": None,
    }
    (spread,) = pod(one(docs, "Deployment", OPERATOR))["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"


# -- images ------------------------------------------------------------------------------------------------


def test_the_oe_takes_the_runtime_image_pull_policy_not_the_operators(helm: Path) -> None:
    docs = render(helm, image__operator__pullPolicy="Never", image__runtime__pullPolicy="Always")
    assert pod(one(docs, "Deployment", OPERATOR))["containers"][0]["imagePullPolicy"] == "Never"
    assert pod(one(docs, "Deployment", OE))["containers"][0]["imagePullPolicy"] == "Always"


def test_images_pinned_by_digest_field_or_in_the_repository(helm: Path) -> None:
    docs = render(helm, image__operator__digest=DIGEST, image__runtime__repository=f"reg.example/rt@{DIGEST}")
    assert (
        pod(one(docs, "Deployment", OPERATOR))["containers"][0]["image"] == f"agent-engine/operator@{DIGEST}"
    )
    oe_image = pod(one(docs, "Deployment", OE))["containers"][0]["image"]
    assert oe_image == f"reg.example/rt@{DIGEST}"
    # Agents that name no image run the pinned one too.
    env = {e["name"]: e.get("value") for e in pod(one(docs, "Deployment", OPERATOR))["containers"][0]["env"]}
    assert env["AGENT_OPERATOR_DEFAULT_IMAGE"] == oe_image


def test_node_agents_default_image_is_the_node_runtime_image_at_the_chart_version(helm: Path) -> None:
    def node_image(**values: str) -> str | None:
        operator = pod(one(render(helm, **values), "Deployment", OPERATOR))["containers"][0]
        return {e["name"]: e.get("value") for e in operator["env"]}["AGENT_OPERATOR_DEFAULT_NODE_IMAGE"]

    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert node_image() == f"agent-engine/runtime-node:{version}"
    assert node_image(image__nodeRuntime__digest=DIGEST) == f"agent-engine/runtime-node@{DIGEST}"


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"image.operator.digest": "sha256:xyz"}, "/image/operator/digest"),
        ({"image.nodeRuntime.repository": "Upper/Case"}, "/image/nodeRuntime/repository"),
        ({"image.runtime.digest": "md5:" + "a" * 32}, "/image/runtime/digest"),
        ({"image.runtime.repository": "reg.example/rt@sha256:short"}, "/image/runtime/repository"),
        ({"image.runtime.pullPolicy": "Sometimes"}, "/image/runtime/pullPolicy"),
    ],
)
def test_a_bad_digest_or_pull_policy_is_refused_naming_the_field(
    helm: Path, values: dict, named: str
) -> None:
    assert named in refused(helm, values)


# -- Secrets RBAC -------------------------------------------------------------------------------------------


def _grants(docs: list[dict[str, Any]], *, subject: str) -> list[tuple[str, str, set[str]]]:
    """(namespace or '*', resource, verbs) for every rule bound to the ServiceAccount `subject`."""
    roles = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    out = []
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s["kind"] == "ServiceAccount" and s["name"] == subject for s in binding["subjects"]):
            continue
        ns = binding["metadata"].get("namespace")
        ref = binding["roleRef"]
        role = roles[(ref["kind"], ns if ref["kind"] == "Role" else None, ref["name"])]
        for rule in role["rules"]:
            for resource in rule["resources"]:
                out.append((ns or "*", resource, set(rule["verbs"])))
    return out


def test_the_oe_reads_secrets_only_in_the_registrations_namespace_where_the_operator_publishes(
    helm: Path,
) -> None:
    docs = render(helm)
    namespace = one(docs, "Namespace", REGISTRATIONS)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # Beside the registrations: the reviews that check each client's token and rights (issue 28).
    assert sorted(_grants(docs, subject=OE), key=lambda g: g[:2]) == [
        ("*", "subjectaccessreviews", {"create"}),
        ("*", "tokenreviews", {"create"}),
        (REGISTRATIONS, "secrets", {"get", "list", "watch"}),
    ]
    oe_env = {e["name"]: e.get("value") for e in pod(one(docs, "Deployment", OE))["containers"][0]["env"]}
    op_env = {
        e["name"]: e.get("value") for e in pod(one(docs, "Deployment", OPERATOR))["containers"][0]["env"]
    }
    assert oe_env["OE_NAMESPACE"] == op_env["AGENT_OPERATOR_REGISTRATIONS_NAMESPACE"] == REGISTRATIONS
    # The AERs still find the OE (and their NetworkPolicies admit it) in the release namespace.
    assert op_env["AGENT_OPERATOR_OE_NAMESPACE"] == NS
    # Writes on Secrets: only the registrations' namespace; elsewhere create and update alone (the token
    # Secrets: an orphaned or foreign one is replaced with a fresh token, issue 43), never patch or delete.
    for values in ({}, {"operator.watchNamespaces": "{team-a}"}):
        grants = _grants(
            render(helm, **{k.replace(".", "__"): v for k, v in values.items()}), subject=OPERATOR
        )
        for ns, resource, verbs in grants:
            if resource == "secrets" and verbs & {"patch", "delete"}:
                assert ns == REGISTRATIONS, (ns, verbs)
        assert (REGISTRATIONS, "secrets", {"get", "list", "watch", "create", "patch", "delete"}) in grants
        assert not any(ns == NS and resource == "secrets" for ns, resource, _ in grants)


def test_registrations_namespace_can_be_named_and_must_not_hold_agents(helm: Path) -> None:
    docs = render(helm, oe__registrations__namespace="regs", oe__registrations__createNamespace="false")
    assert not [d for d in docs if d["kind"] == "Namespace"]
    assert ("regs", "secrets", {"get", "list", "watch"}) in _grants(docs, subject=OE)
    assert [g for g in _grants(docs, subject=OE) if g[1] == "secrets"] == [
        ("regs", "secrets", {"get", "list", "watch"})
    ]
    error = refused(helm, {"operator.watchNamespaces": "{team-a,regs}", "oe.registrations.namespace": "regs"})
    assert "oe.registrations.namespace regs is one of operator.watchNamespaces" in error
    error = refused(helm, {"oe.registrations.namespace": NS})
    assert "oe.registrations.createNamespace=false" in error
    assert "/oe/registrations/namespace" in refused(helm, {"oe.registrations.namespace": "Bad_Name"})


def test_cluster_wide_mode_keeps_the_operator_out_of_namespaces_without_agents(helm: Path) -> None:
    docs = render(helm)
    policy = one(docs, "ValidatingAdmissionPolicy", "agent-engine-operator-protected-namespaces")
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"] == f'request.userInfo.username == "system:serviceaccount:{NS}:{OPERATOR}"'
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert {"CREATE", "UPDATE", "DELETE"} == set(rules[0]["operations"]) and rules[0]["resources"] == ["*"]
    binding = one(docs, "ValidatingAdmissionPolicyBinding", "agent-engine-operator-protected-namespaces")
    assert binding["spec"]["validationActions"] == ["Deny"]
    (expr,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert set(expr["values"]) == {"kube-system", "kube-public", "kube-node-lease", NS, REGISTRATIONS}
    # A Role per namespace needs none; an empty list turns it off.
    for values in ({"operator__watchNamespaces": "{a}"}, {"operator__protectedNamespaces": "null"}):
        assert not [d for d in render(helm, **values) if d["kind"].startswith("ValidatingAdmissionPolicy")]


# -- the OE's NetworkPolicy (issue 27) ----------------------------------------------------------------------


def _agent_pod_labels(component: str) -> dict[str, str]:
    """What the operator puts on an Agent component's pods (render.labels and its policy label)."""
    return {**labels("shop", component), "agentengine.io/network-policy": "0123456789"}


def _peers(rules: list[dict[str, Any]], port: int) -> list[dict[str, Any]]:
    key = "from" if rules and "from" in rules[0] else "to"
    return [
        peer
        for rule in rules
        if any(p["port"] == port for p in rule.get("ports", []))
        for peer in rule.get(key, [])
    ]


def test_the_oe_network_policy_admits_clients_and_aers_and_reaches_runtimes_store_and_dns_only(
    helm: Path,
) -> None:
    docs = render(helm, **{k.replace(".", "__"): v for k, v in MONGO.items()})
    policy = one(docs, "NetworkPolicy", OE)["spec"]
    oe_pod = one(docs, "Deployment", OE)["spec"]["template"]["metadata"]["labels"]
    assert matches(policy["podSelector"], oe_pod)
    assert not matches(
        policy["podSelector"], one(docs, "Deployment", OPERATOR)["spec"]["template"]["metadata"]["labels"]
    )
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}

    # Ingress: the OE's one port, from client namespaces, the chart's operator (a Connector's connection
    # test, in the release's namespace: no namespaceSelector) and Agents' AERs; never from a Tool Pod.
    (ingress,) = policy["ingress"]
    assert ingress["ports"] == [{"protocol": "TCP", "port": 8080}]
    clients, operator, aers = ingress["from"]
    assert clients == {"namespaceSelector": {"matchLabels": {"agentengine.io/oe-client": "true"}}}
    assert set(operator) == {"podSelector"}
    operator_pod = one(docs, "Deployment", OPERATOR)["spec"]["template"]["metadata"]["labels"]
    assert matches(operator["podSelector"], operator_pod) and not matches(operator["podSelector"], oe_pod)
    assert aers["namespaceSelector"] == {}
    assert matches(aers["podSelector"], _agent_pod_labels("aer"))
    for other in ("tool", "memory"):
        assert not matches(aers["podSelector"], _agent_pod_labels(other))
    assert not matches(aers["podSelector"], {COMPONENT_LABEL: "aer"})  # not an Agent's pod

    # Egress: AERs, Tool Pods and Memory servers on their ports, the API server, MongoDB, DNS; nothing else.
    egress = policy["egress"]
    aer_port, tool_port = contract.PORTS[contract.RunnerMode.AER], contract.PORTS[contract.RunnerMode.TOOL]
    memory_port = contract.PORTS[contract.RunnerMode.MEMORY]
    (to_aer,) = _peers(egress, aer_port)
    (to_tool,) = _peers(egress, tool_port)
    (to_memory,) = _peers(egress, memory_port)
    assert matches(to_memory["podSelector"], _agent_pod_labels("memory"))
    assert not matches(to_memory["podSelector"], _agent_pod_labels("tool"))
    assert not matches(to_memory["podSelector"], {COMPONENT_LABEL: "memory"})  # not an Agent's pod
    assert matches(to_aer["podSelector"], _agent_pod_labels("aer"))
    assert not matches(to_aer["podSelector"], _agent_pod_labels("tool"))
    assert matches(to_tool["podSelector"], _agent_pod_labels("tool"))
    assert not matches(to_tool["podSelector"], _agent_pod_labels("memory"))
    ports = sorted(p["port"] for rule in egress for p in rule.get("ports", []))
    assert ports == sorted([aer_port, tool_port, memory_port, 443, 6443, 27017, 53, 53])
    assert all(rule.get("ports") for rule in egress), "an egress rule without ports opens every port"
    dns = [rule for rule in egress if "to" not in rule]
    assert dns == [{"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}]
    assert AGENT_LABEL in {e["key"] for e in to_tool["podSelector"]["matchExpressions"]}


def test_the_oe_network_policy_values(helm: Path) -> None:
    docs = render(
        helm,
        oe__networkPolicy__clientNamespaceSelector__matchLabels__team="web",
        oe__networkPolicy__clientPodSelector__matchLabels__app="gateway",
        **{
            "oe__networkPolicy__apiServer__cidrs[0]": "10.0.0.1/32",
            "oe__networkPolicy__apiServer__ports[0]": "6443",
            "oe__networkPolicy__extraIngress[0]__ports[0]__port": "8080",
        },
    )
    policy = one(docs, "NetworkPolicy", OE)["spec"]
    clients = policy["ingress"][0]["from"][0]
    assert clients["namespaceSelector"]["matchLabels"]["team"] == "web"
    assert clients["podSelector"] == {"matchLabels": {"app": "gateway"}}
    assert policy["ingress"][1] == {"ports": [{"port": 8080}]}
    api = [rule for rule in policy["egress"] if any("ipBlock" in peer for peer in rule.get("to", []))]
    assert api == [
        {"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}], "ports": [{"protocol": "TCP", "port": 6443}]}
    ]
    # SQLite: no store egress at all.
    assert 27017 not in {p["port"] for rule in policy["egress"] for p in rule.get("ports", [])}
    assert not [d for d in render(helm, oe__networkPolicy__enabled="false") if d["kind"] == "NetworkPolicy"]
    assert "/oe/networkPolicy/apiServer/cidrs/0" in refused(
        helm, {"oe.networkPolicy.apiServer.cidrs[0]": "everywhere"}
    )


def test_the_client_cluster_roles_hold_the_oe_verbs_and_aggregate_into_view_edit_admin(helm: Path) -> None:
    """Issue 28: viewers read, editors also invoke/cancel/interrupt, admins also approve; aggregation off."""
    docs = render(helm)
    expected = {
        "viewer": ({"agents/executions"}, "view"),
        "invoker": ({"agents/invoke", "agents/cancel", "agents/interrupt", "agents/executions"}, "edit"),
        "reviewer": ({"agents/approve", "agents/memoryexport", "agents/executions"}, "admin"),
    }
    for role, (resources, into) in expected.items():
        found = one(docs, "ClusterRole", f"agent-engine-{role}")
        assert {r for rule in found["rules"] for r in rule["resources"]} == resources
        assert all(rule["apiGroups"] == ["agentengine.io"] for rule in found["rules"])
        assert found["metadata"]["labels"][f"rbac.authorization.k8s.io/aggregate-to-{into}"] == "true"
    plain = render(helm, oe__clientRbac__aggregateToDefaultRoles="false")
    for role in expected:
        labels = one(plain, "ClusterRole", f"agent-engine-{role}")["metadata"]["labels"]
        assert not any(key.startswith("rbac.authorization.k8s.io/aggregate-to-") for key in labels)
    none = render(helm, oe__clientRbac__create="false")
    assert not [d for d in none if d["metadata"]["name"] in {f"agent-engine-{r}" for r in expected}]


# -- the OE's signing key (issue 27) ---------------------------------------------------------------------


def _oe_key_pair(docs: list[dict[str, Any]]) -> tuple[str, str]:
    secret = one(docs, "Secret", "agent-engine-oe-signing-key")
    config_map = one(docs, "ConfigMap", "agent-engine-oe-public-key")
    private = base64.b64decode(secret["data"][contract.OE_SIGNING_KEY_KEY]).decode()
    return private, config_map["data"][contract.OE_PUBLIC_KEY_KEY]


def test_the_chart_makes_the_oe_signing_key_mounts_it_in_the_oe_and_its_public_key_in_the_operator(
    helm: Path, tmp_path: Path
) -> None:
    """The Secret holds an Ed25519 PKCS#8 key, the ConfigMap a certificate carrying its public half; the OE
    mounts the Secret (and only the OE), the operator the ConfigMap, each with its setting."""
    docs = render(helm)
    private, certificate = _oe_key_pair(docs)
    assert private.startswith("-----BEGIN PRIVATE KEY-----"), "PKCS#8 PEM"
    assert certificate.startswith("-----BEGIN CERTIFICATE-----")
    assert normalize_public_key_pem(certificate) == public_key_pem(private)
    oe = pod(one(docs, "Deployment", OE))
    (container,) = oe["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env[contract.OE_SIGNING_KEY_FILE_ENV] == contract.OE_SIGNING_KEY_PATH
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["oe-signing-key"]["mountPath"] == contract.OE_SIGNING_KEY_MOUNT_DIR
    assert "subPath" not in mounts["oe-signing-key"], "a subPath mount never sees a rotated key"
    volumes = {v["name"]: v for v in oe["volumes"]}
    assert volumes["oe-signing-key"]["secret"]["secretName"] == "agent-engine-oe-signing-key"
    assert volumes["oe-signing-key"]["secret"]["defaultMode"] == 0o440
    # No other workload of the chart mounts the private key.
    for deployment in (d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] != OE):
        assert "agent-engine-oe-signing-key" not in str(deployment)
    operator = pod(one(docs, "Deployment", OPERATOR))
    (container,) = operator["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["AGENT_OPERATOR_OE_PUBLIC_KEY_FILE"] == contract.OE_PUBLIC_KEY_PATH
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["oe-public-key"]["mountPath"] == contract.OE_PUBLIC_KEY_MOUNT_DIR
    volumes = {v["name"]: v for v in operator["volumes"]}
    assert volumes["oe-public-key"]["configMap"]["name"] == "agent-engine-oe-public-key"
    # The operator restarts on a new key (it reads the file once): its pod names the certificate's digest.
    annotations = one(docs, "Deployment", OPERATOR)["spec"]["template"]["metadata"]["annotations"]
    digest = hashlib.sha256(certificate.encode()).hexdigest()
    assert annotations["agent-engine.io/oe-public-key-sha256"] == digest
    # The operator's own reading of the mounted file: the key's PEM, not the certificate's bytes.
    path = tmp_path / contract.OE_PUBLIC_KEY_KEY
    path.write_text(certificate)
    read = OperatorSettings.from_env({"AGENT_OPERATOR_OE_PUBLIC_KEY_FILE": str(path)}).render.oe_public_key
    assert read == public_key_pem(private)
    # Without the chart's OE, nothing of it.
    bare = render(helm, oe__enabled="false")
    assert not [d for d in bare if "oe-signing-key" in d["metadata"]["name"] or "oe-public-key" in str(d)]


def test_the_agents_configmap_digest_depends_on_the_key_alone_not_on_the_certificate(helm: Path) -> None:
    """Two renders (two certificates: `helm template` has no cluster to look the Secret up in, so two keys)
    name different ConfigMaps; a second certificate made around the first render's key, with other dates and
    serial, names the same one as the first, which is what a `helm upgrade` that re-made it would do."""
    first_private, first_cert = _oe_key_pair(render(helm))
    second_private, second_cert = _oe_key_pair(render(helm))
    assert first_private != second_private
    name = oe_public_key_config_map_name(normalize_public_key_pem(first_cert))
    assert oe_public_key_config_map_name(normalize_public_key_pem(second_cert)) != name
    key = serialization.load_pem_private_key(first_private.encode(), password=None)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "oe")])
    now = datetime.datetime.now(datetime.UTC)
    remade = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(key, None)  # type: ignore[arg-type]
        .public_bytes(serialization.Encoding.PEM)
        .decode()
    )
    assert remade != first_cert
    assert oe_public_key_config_map_name(normalize_public_key_pem(remade)) == name
    assert oe_public_key_config_map_name(public_key_pem(first_private)) == name


def test_the_operator_may_ask_the_oe_for_connection_tests_with_a_token_for_the_oes_audience_only(
    helm: Path,
) -> None:
    docs = render(helm)
    operator = pod(one(docs, "Deployment", OPERATOR))
    (container,) = operator["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in operator["volumes"]}
    # A projected token bound to the OE's audience (the API server refuses it), re-read by the operator.
    assert env["AGENT_OPERATOR_OE_TOKEN_FILE"] == mounts["oe-token"]["mountPath"] + "/token"
    assert mounts["oe-token"]["readOnly"] is True
    (source,) = volumes["oe-token"]["projected"]["sources"]
    assert source["serviceAccountToken"]["audience"] == "agent-engine"
    assert source["serviceAccountToken"]["path"] == "token"
    assert env["AGENT_OPERATOR_CONNECTION_TEST_SECONDS"] == "600"
    # The one verb the OE asks of who requests a connector test; nothing else of the client API.
    client_rules = [
        rule
        for doc in docs
        if doc["kind"] in ("ClusterRole", "Role") and doc["metadata"]["name"].endswith("-operator")
        for rule in doc.get("rules") or []
        if any(
            r.startswith("agents/") and r not in ("agents/status", "agents/finalizers")
            for r in rule["resources"]
        )
    ]
    assert client_rules == [
        {"apiGroups": ["agentengine.io"], "resources": ["agents/invoke"], "verbs": ["create"]}
    ]
    # Without the chart's OE: no token, no grant.
    bare = render(helm, oe__enabled="false")
    bare_operator = one(bare, "Deployment", OPERATOR)
    assert "oe-token" not in str(bare_operator) and "AGENT_OPERATOR_OE_TOKEN_FILE" not in str(bare_operator)
    assert "agents/invoke" not in str([d for d in bare if d["metadata"]["name"].endswith("-operator")])
