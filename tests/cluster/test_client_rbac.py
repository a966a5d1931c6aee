"""Clients of the OE are the cluster's own users, authorized by its RBAC (issue 28), on a real API server.

Two Agent namespaces (team A and team B, each an AER and a Tool Pod as local processes), one OE whose
ServiceAccount holds only the chart's `create tokenreviews` and `create subjectaccessreviews`, and three
people as ServiceAccounts with audience-bound tokens: alice (edit in A), bob (view in A, nothing in B),
carol (admin in B). The chart's ClusterRoles are rendered from charts/agent-engine and aggregated into
Kubernetes' own roles by its controller-manager, so no binding names them until alice is made a reviewer.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from agent_runtime.oe.registration import tool_entries
from tests.cluster.controlplane import ControlPlane, wait_until
from tests.conftest import REPO_ROOT, Process
from tests.integration.loop.harness import LLM_KEY, Platform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

CHART = REPO_ROOT / "charts" / "agent-engine"
AUDIENCE = "agent-engine"
TTL_S = 1.0  # the OE's cache TTL here: a revocation must bite within it (plus one API round trip)
APISERVER_TOKEN_CACHE_S = 10.0  # kube-apiserver caches a successful token authentication this long


@dataclass
class Team(Platform):
    """One Agent's AER and Tool Pod, with its own name and runtime token (the harness's are team-a's)."""

    agent: str = ""
    runtime_token: str = ""

    def _runtime_env(self, mode: str, port: int) -> dict[str, str]:
        env = super()._runtime_env(mode, port)
        (self.tmp / "token").write_text(self.runtime_token)
        env["APP_ID"] = self.agent.replace("/", ".")
        return env

    def registration_document(self) -> dict[str, Any]:
        surface = httpx.get(
            f"http://127.0.0.1:{self.aer_port}/tools",
            headers={"authorization": f"Bearer {self.runtime_token}"},
        ).json()["tools"]
        return {
            "agent": self.agent,
            "token": self.runtime_token,
            "aerUrl": f"http://127.0.0.1:{self.aer_port}",
            "toolUrl": f"http://127.0.0.1:{self.tool_port}",
            "tools": [entry.model_dump() for entry in tool_entries(surface)],
        }


@dataclass
class World:
    cluster: ControlPlane
    oe_url: str
    ns_a: str
    ns_b: str
    people: str
    roles: str  # the rendered ClusterRoles' prefix: <roles>-viewer, -invoker, -reviewer
    tokens: dict[str, str]
    oe: Platform

    def user(self, name: str) -> str:
        return f"system:serviceaccount:{self.people}:{name}"

    def http(self, who: str) -> httpx.Client:
        token = self.tokens.get(who, who)
        return httpx.Client(base_url=self.oe_url, headers={"authorization": f"Bearer {token}"}, timeout=30)

    def wait(self, who: str, execution_id: str, *states: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.http(who) as http:
            while True:
                view = http.get(f"/execution/{execution_id}").json()
                if view.get("status") in states:
                    return dict(view)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{execution_id} still {view}:\n{self.oe.outputs()}")
                time.sleep(0.05)


def _namespace(core: client.CoreV1Api, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def _service_account_token(
    core: client.CoreV1Api, namespace: str, name: str, *, audiences: list[str], seconds: int = 3600
) -> str:
    try:
        core.create_namespaced_service_account(
            namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
        )
    except ApiException as error:
        if error.status != 409:
            raise
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=audiences, expiration_seconds=seconds)
    )
    return str(core.create_namespaced_service_account_token(name, namespace, request).status.token)


def _bind(
    rbac: client.RbacAuthorizationV1Api, namespace: str, *, name: str, role: str, sa: tuple[str, str]
) -> None:
    rbac.create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name=name),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name=sa[1], namespace=sa[0])],
        ),
    )


def _render_client_rbac(cluster: ControlPlane, *, release: str, namespace: str) -> str:
    proc = subprocess.run(
        [
            str(cluster.bin_dir / "helm"),
            "template",
            release,
            str(CHART),
            "--namespace",
            namespace,
            "--show-only",
            "templates/client-rbac.yaml",
        ],
        env=cluster.env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return proc.stdout


@pytest.fixture
def world(cluster: ControlPlane, tmp_path: Path, spawn: Callable[..., Process]) -> Iterator[World]:
    release = f"rbac-{uuid.uuid4().hex[:6]}"
    roles = f"{release}-agent-engine"
    assert cluster.oidc is not None
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        ns_a, ns_b, people = (_namespace(core, p) for p in ("team-a", "team-b", "people"))
        rendered = _render_client_rbac(cluster, release=release, namespace=people)
        cluster.kubectl("apply", "-f", "-", input=rendered)
        try:
            # The OE's ServiceAccount: the chart's binding names it; its token is the API server's audience.
            oe_token = _service_account_token(core, people, f"{roles}-oe", audiences=[])
            tokens = {
                who: _service_account_token(core, people, who, audiences=[AUDIENCE])
                for who in ("alice", "bob", "carol", "frontend")
            }
            tokens["wrong-audience"] = _service_account_token(core, people, "alice", audiences=[])
            rbac = client.RbacAuthorizationV1Api(api)
            _bind(rbac, ns_a, name="alice-edit", role="edit", sa=(people, "alice"))
            _bind(rbac, ns_a, name="bob-view", role="view", sa=(people, "bob"))
            _bind(rbac, ns_b, name="carol-admin", role="admin", sa=(people, "carol"))
            # A trusted front end: invokes in A on behalf of one named user (impersonate users/mallory).
            _bind(rbac, ns_a, name="frontend-invoker", role=f"{roles}-invoker", sa=(people, "frontend"))
            rbac.create_cluster_role(
                client.V1ClusterRole(
                    metadata=client.V1ObjectMeta(name=f"{release}-impersonate-mallory"),
                    rules=[
                        client.V1PolicyRule(
                            api_groups=[""],
                            resources=["users"],
                            verbs=["impersonate"],
                            resource_names=["mallory"],
                        )
                    ],
                )
            )
            rbac.create_cluster_role_binding(
                client.V1ClusterRoleBinding(
                    metadata=client.V1ObjectMeta(name=f"{release}-impersonate-mallory"),
                    role_ref=client.V1RoleRef(
                        api_group="rbac.authorization.k8s.io",
                        kind="ClusterRole",
                        name=f"{release}-impersonate-mallory",
                    ),
                    subjects=[client.RbacV1Subject(kind="ServiceAccount", name="frontend", namespace=people)],
                )
            )
            # Aggregation is the controller-manager's: wait until `edit` carries the invoker's rule.
            wait_until(
                "the chart's ClusterRoles aggregated into edit and admin",
                lambda: (
                    _aggregated(rbac, "edit", "agents/invoke")
                    and _aggregated(rbac, "admin", "agents/approve")
                ),
                timeout=30,
            )

            # An OIDC group of the loopback issuer (tests/cluster/oidc.py): admins of B, by the group claim.
            rbac.create_namespaced_role_binding(
                ns_b,
                client.V1RoleBinding(
                    metadata=client.V1ObjectMeta(name="oidc-ops-admin"),
                    role_ref=client.V1RoleRef(
                        api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="admin"
                    ),
                    subjects=[
                        client.RbacV1Subject(
                            kind="Group", name="oidc:ops", api_group="rbac.authorization.k8s.io"
                        )
                    ],
                ),
            )
            sa_dir = tmp_path / "oe-sa"
            sa_dir.mkdir()
            (sa_dir / "token").write_text(oe_token)
            (sa_dir / "ca.crt").write_bytes(cluster.ca.cert_pem)

            with running_llm_peer(api_key=LLM_KEY) as peer, running_echo_provider() as provider:
                a_dir, b_dir = tmp_path / "a", tmp_path / "b"
                a_dir.mkdir()
                b_dir.mkdir()
                common = {"spawn": spawn, "llm_base_url": peer.base_url, "provider_url": provider.url}
                team_a = Team(tmp=a_dir, agent=f"{ns_a}/loop", runtime_token="rt-a-" + "a" * 32, **common)
                team_b = Team(
                    tmp=b_dir,
                    agent=f"{ns_b}/loop",
                    runtime_token="rt-b-" + "b" * 32,
                    oe_port=team_a.oe_port,
                    **common,
                )
                # One OE signs for both teams' runtimes (issue 27): they hold its one public key.
                shutil.copytree(team_a.key_files()[0].parent, b_dir / "oe-keys")
                for team in (team_a, team_b):
                    team.start_tool_pod()
                    team.start_aer()
                registrations = a_dir / "registrations"
                registrations.mkdir()
                for team in (team_a, team_b):
                    name = team.agent.replace("/", ".")
                    (registrations / f"{name}.json").write_text(json.dumps(team.registration_document()))
                team_a.start_oe(
                    extra={
                        "OE_CLIENT_AUTH": "kubernetes",
                        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
                        "KUBERNETES_SERVICE_PORT": str(cluster.apiserver_port),
                        "OE_SERVICEACCOUNT_DIR": str(sa_dir),
                        "OE_CLIENT_AUTH_CACHE_TTL_S": str(TTL_S),
                        "OE_CLIENT_AUTH_OIDC_ISSUERS": cluster.oidc.url,
                        # The console's OIDC sign-in (issue 30, tests/cluster/test_console_rbac.py).
                        "OE_CONSOLE_OIDC_ISSUER": cluster.oidc.url,
                        "OE_CONSOLE_OIDC_CLIENT_ID": "agent-engine-console",
                        "OE_CONSOLE_OIDC_SCOPES": "openid groups",
                        "OE_CONSOLE_OIDC_CA_FILE": str(sa_dir / "ca.crt"),
                    }
                )
                yield World(
                    cluster=cluster,
                    oe_url=team_a.oe_url,
                    ns_a=ns_a,
                    ns_b=ns_b,
                    people=people,
                    roles=roles,
                    tokens=tokens,
                    oe=team_a,
                )
        finally:
            cluster.kubectl("delete", "--ignore-not-found", "-f", "-", input=rendered, check=False)
            cluster.kubectl(
                "delete",
                "clusterrole,clusterrolebinding",
                f"{release}-impersonate-mallory",
                "--ignore-not-found",
                check=False,
            )
            for ns in (ns_a, ns_b, people):
                core.delete_namespace(ns)


def _aggregated(rbac: client.RbacAuthorizationV1Api, role: str, resource: str) -> bool:
    found = rbac.read_cluster_role(role)
    return any(resource in (rule.resources or []) for rule in found.rules or [])


def _reviews_served(cluster: ControlPlane) -> dict[str, float]:
    """How many TokenReviews and SubjectAccessReviews the API server has answered (its own metrics)."""
    metrics = cluster.kubectl("get", "--raw", "/metrics").stdout
    counts = {"tokenreviews": 0.0, "subjectaccessreviews": 0.0}
    for line in metrics.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        for kind in counts:
            if f'resource="{kind}"' in line and 'verb="POST"' in line:
                counts[kind] += float(line.rsplit(" ", 1)[1])
    return counts


def _transfer(to: str) -> dict[str, Any]:
    return {"mode": "calls", "calls": [["transfer", {"amount": 5, "to": to}]]}


def _resume(ns: str, execution_id: str) -> str:
    return f"/api/v1/projects/{ns}/executions/{execution_id}/resume"


def _eventually_status(
    world: World, who: str, method: str, path: str, status: int, *, within: float, **kwargs: Any
) -> tuple[httpx.Response, float]:
    """Send until the answer is `status`; the answer and how long it took."""
    began = time.monotonic()
    with world.http(who) as http:
        while True:
            response = http.request(method, path, **kwargs)
            if response.status_code == status:
                return response, time.monotonic() - began
            if time.monotonic() - began > within:
                raise AssertionError(f"{who} {method} {path}: still {response.status_code} {response.text}")
            time.sleep(0.05)


def test_the_matrix_of_issue_28(world: World) -> None:
    a, b = world.ns_a, world.ns_b
    matrix: list[tuple[str, str, str, str]] = []  # who, what, expected, got

    def record(who: str, what: str, expected: int, response: httpx.Response) -> None:
        matrix.append((who, what, str(expected), str(response.status_code)))
        assert response.status_code == expected, (who, what, response.text)

    with world.http("alice") as alice, world.http("bob") as bob, world.http("carol") as carol:
        # alice (edit in A) invokes A's Agent; she is who the execution names, user_id included.
        response = alice.post("/invoke", json={"agent": f"{a}/loop", "input": _transfer("approve-me")})
        record("alice", f"invoke {a}/loop", 202, response)
        held_a = response.json()["execution_id"]
        response = alice.post("/invoke", json={"agent": f"{a}/loop", "input": _transfer("cancel-me")})
        to_cancel = response.json()["execution_id"]
        view = world.wait("alice", held_a, "suspended")
        assert view["invoked_by"]["username"] == world.user("alice")
        assert view["invoked_by"]["uid"] and "system:serviceaccounts" in view["invoked_by"]["groups"]
        assert view["user_id"] == world.user("alice")

        # bob (view in A) may not invoke: a Status naming verb, resource, namespace and the granting role.
        response = bob.post("/invoke", json={"agent": f"{a}/loop", "input": _transfer("bob")})
        record("bob", f"invoke {a}/loop", 403, response)
        status = response.json()
        assert status["kind"] == "Status" and status["reason"] == "Forbidden"
        details = status["details"]
        assert (details["verb"], details["resource"], details["namespace"]) == ("create", "agents/invoke", a)
        assert details["grantedBy"]["clusterRole"] == "agent-engine-invoker"
        assert world.user("bob") in status["message"]
        # ... but reads it, its audit and its events.
        record("bob", f"read {a} execution", 200, bob.get(f"/execution/{held_a}"))
        record("bob", f"read {a} audit", 200, bob.get(f"/execution/{held_a}/audit"))
        # ... and may not cancel it (403 naming agents/cancel) nor approve it.
        response = bob.post(f"/execution/{to_cancel}/cancel")
        record("bob", f"cancel {a} execution", 403, response)
        assert response.json()["details"]["resource"] == "agents/cancel"
        record(
            "bob", f"approve {a} held call", 403, bob.post(_resume(a, held_a), json={"decision": "approved"})
        )

        # carol (admin in B) invokes B's Agent; its call is held.
        response = carol.post("/invoke", json={"agent": f"{b}/loop", "input": _transfer("carol")})
        record("carol", f"invoke {b}/loop", 202, response)
        held_b = response.json()["execution_id"]
        world.wait("carol", held_b, "suspended")

        # bob sees nothing of B: its execution is a 404 worded like an unknown one, in every route.
        unknown = uuid.uuid4().hex
        for suffix in ("", "/audit", "/events", "/drain"):
            response = bob.get(f"/execution/{held_b}{suffix}")
            record("bob", f"read {b} execution{suffix}", 404, response)
            missing = bob.get(f"/execution/{unknown}{suffix}")
            assert response.json() == json.loads(missing.text.replace(unknown, held_b))
        record("bob", f"cancel {b} execution", 404, bob.post(f"/execution/{held_b}/cancel"))
        record(
            "bob", f"approve {b} held call", 404, bob.post(_resume(b, held_b), json={"decision": "approved"})
        )
        # ... its reviews are not listed, nor its executions.
        response = bob.get(f"/api/v1/projects/{b}/reviews")
        record("bob", f"list {b} reviews", 200, response)
        assert response.json()["items"] == []
        listed = {item["execution_id"] for item in bob.get("/executions").json()["items"]}
        assert held_a in listed and held_b not in listed
        assert {item["execution_id"] for item in carol.get("/executions").json()["items"]} == {held_b}
        assert [
            item["execution_id"] for item in carol.get(f"/api/v1/projects/{b}/reviews").json()["items"]
        ] == [held_b]

        # alice may cancel (edit holds the invoker's verbs), and the execution names her.
        response = alice.post(f"/execution/{to_cancel}/cancel")
        record("alice", f"cancel {a} execution", 200, response)
        assert response.json()["cancelled_by"]["username"] == world.user("alice")

        # alice may not approve until she is granted the reviewer's ClusterRole; then within the TTL.
        response = alice.post(_resume(a, held_a), json={"decision": "approved"})
        record("alice", f"approve {a} held call (edit only)", 403, response)
        assert response.json()["details"]["grantedBy"]["clusterRole"] == "agent-engine-reviewer"
        with world.cluster.api_client() as api:
            _bind(
                client.RbacAuthorizationV1Api(api),
                a,
                name="alice-reviewer",
                role=f"{world.roles}-reviewer",
                sa=(world.people, "alice"),
            )
        response, took = _eventually_status(
            world, "alice", "POST", _resume(a, held_a), 202, within=TTL_S + 10, json={"decision": "approved"}
        )
        record("alice", f"approve {a} held call (granted reviewer)", 202, response)
        print(f"alice's new binding took effect after {took:.2f}s (cache TTL {TTL_S}s)")

        # carol approves B's held call; the execution and its audit name her.
        response = carol.post(_resume(b, held_b), json={"decision": "approved", "reviewer_notes": "ok"})
        record("carol", f"approve {b} held call", 202, response)
        view = world.wait("carol", held_b, "completed", "failed")
        assert view["status"] == "completed", view
        assert view["reviews"][0]["decided_by"]["username"] == world.user("carol")
        resume = next(
            r for r in carol.get(f"/execution/{held_b}/audit").json()["records"] if r["kind"] == "resume"
        )
        assert resume["decided_by"]["username"] == world.user("carol")
        assert world.wait("alice", held_a, "completed", "failed")["reviews"][0]["decided_by"]["username"] == (
            world.user("alice")
        )

        # user_id names another user only with `impersonate users` on that name.
        response = alice.post(
            "/invoke",
            json={"agent": f"{a}/loop", "input": {"mode": "calls", "calls": []}, "user_id": "mallory"},
        )
        record("alice", "invoke as user mallory", 403, response)
        assert response.json()["details"]["resource"] == "users"
        with world.http("frontend") as frontend:
            body = {"agent": f"{a}/loop", "input": {"mode": "calls", "calls": []}, "user_id": "mallory"}
            response = frontend.post("/invoke", json=body)
            record("frontend", "invoke as user mallory (impersonate users/mallory)", 202, response)
            view = frontend.get(f"/execution/{response.json()['execution_id']}").json()
            assert view["user_id"] == "mallory" and view["invoked_by"]["username"] == world.user("frontend")
            response = frontend.post("/invoke", json={**body, "user_id": "someone-else"})
            record("frontend", "invoke as user someone-else", 403, response)

    # A steady client pays no API round trip per request: 40 reads within one TTL, at most a review or two.
    before = _reviews_served(world.cluster)
    with world.http("carol") as carol:
        began = time.monotonic()
        for _ in range(40):
            assert carol.get(f"/execution/{held_b}").status_code == 200
        took = time.monotonic() - began
    reviews = {kind: _reviews_served(world.cluster)[kind] - before[kind] for kind in before}
    print(f"40 reads by carol in {took:.2f}s cost {reviews} reviews at the API server")
    if took < TTL_S:
        assert reviews["tokenreviews"] <= 1 and reviews["subjectaccessreviews"] <= 1, reviews

    # Tokens the API server does not accept for the OE's audience: 401 with WWW-Authenticate: Bearer.
    for who in ("not-a-token", "wrong-audience"):
        with world.http(who) as http:
            response = http.get("/executions")
        record(who, "list executions", 401, response)
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["reason"] == "Unauthorized"
    with httpx.Client(base_url=world.oe_url) as anonymous:
        record("(no token)", "list executions", 401, anonymous.get("/executions"))

    # A revoked token (its ServiceAccount deleted) stops working within the OE's cache TTL on top of the
    # API server's own cache of successful token authentications (10 s, not configurable).
    with world.http("bob") as bob:
        record("bob", "list executions (before revocation)", 200, bob.get("/executions"))
    with world.cluster.api_client() as api:
        client.CoreV1Api(api).delete_namespaced_service_account("bob", world.people)
    response, took = _eventually_status(world, "bob", "GET", "/executions", 401, within=TTL_S + 10)
    record("bob", "list executions (ServiceAccount deleted)", 401, response)
    print(f"bob's revoked token was refused after {took:.2f}s (cache TTL {TTL_S}s)")
    assert took <= TTL_S + APISERVER_TOKEN_CACHE_S + 2.0

    print("\nwho | what | expected | got")
    for row in matrix:
        print(" | ".join(row))
    outputs = world.oe.outputs()
    for token in world.tokens.values():
        assert token not in outputs


def test_an_oidc_user_bound_by_a_group_claim_invokes_and_approves(world: World) -> None:
    """The API server trusts the loopback issuer; the OE reviews its tokens (audience agent-engine) and
    RBAC grants by the `groups` claim: no ServiceAccount and no outside identity provider involved."""
    issuer = world.cluster.oidc
    assert issuer is not None
    b = world.ns_b
    dave = issuer.mint("dave", groups=("ops",))
    with world.http(dave) as http:
        response = http.post("/invoke", json={"agent": f"{b}/loop", "input": _transfer("dave")})
        assert response.status_code == 202, response.text
        execution_id = response.json()["execution_id"]
        view = world.wait(dave, execution_id, "suspended")
        assert view["invoked_by"]["username"] == "oidc:dave"
        assert "oidc:ops" in view["invoked_by"]["groups"] and view["user_id"] == "oidc:dave"
        # Reads of A are not dave's (nothing binds him there): 403 on invoke, and A is not listed.
        forbidden = http.post("/invoke", json={"agent": f"{world.ns_a}/loop", "input": _transfer("x")})
        assert forbidden.status_code == 403 and forbidden.json()["details"]["namespace"] == world.ns_a
        response = http.post(_resume(b, execution_id), json={"decision": "approved"})
        assert response.status_code == 202, response.text
        view = world.wait(dave, execution_id, "completed", "failed")
        assert view["status"] == "completed", view
        resume = next(
            r for r in http.get(f"/execution/{execution_id}/audit").json()["records"] if r["kind"] == "resume"
        )
        assert (
            resume["decided_by"]["username"] == "oidc:dave" and "oidc:ops" in resume["decided_by"]["groups"]
        )

    # Without the group: authenticated, but nothing granted. Another audience or an expired token: 401.
    with world.http(issuer.mint("erin", groups=("sales",))) as http:
        response = http.get(f"/execution/{execution_id}")
        assert response.status_code == 404  # may not read B: like an unknown execution
        assert http.post("/invoke", json={"agent": f"{b}/loop", "input": {}}).status_code == 403
    for token in (
        issuer.mint("dave", groups=("ops",), audience="kubernetes"),
        issuer.mint("dave", groups=("ops",), ttl_s=-60),
    ):
        with world.http(token) as http:
            response = http.get("/executions")
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"] == "Bearer"


def test_a_memory_export_statement_takes_the_reviewer_role_and_impersonation_for_another_user(
    world: World,
) -> None:
    """Issue 27: `create agents/memoryexport` (the chart's reviewer role, aggregated into admin) issues a
    read-only memory statement for the caller; naming another user takes `impersonate users`."""
    a, b = world.ns_a, world.ns_b

    def export(who: str, ns: str, body: dict[str, Any]) -> httpx.Response:
        with world.http(who) as http:
            return http.post(f"/api/v1/projects/{ns}/agents/loop/memory-export-token", json=body)

    # carol is admin in B: her own memory's statement, user_id defaulting to her.
    response = export("carol", b, {})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["user_id"], answer["purpose"]) == (world.user("carol"), "export")
    assert answer["statement"].startswith("aes1.")
    # ... not another user's without impersonate, nor in a namespace she has no role in (A).
    response = export("carol", b, {"user_id": "mallory"})
    assert response.status_code == 403 and response.json()["details"]["resource"] == "users"
    assert export("carol", a, {}).status_code == 403
    # alice (edit in A: invoker) and bob (view in A) may not export: a 403 naming the reviewer role.
    for who in ("alice", "bob"):
        response = export(who, a, {})
        assert response.status_code == 403, (who, response.text)
        details = response.json()["details"]
        assert (details["verb"], details["resource"], details["namespace"]) == (
            "create",
            "agents/memoryexport",
            a,
        )
        assert details["grantedBy"]["clusterRole"] == "agent-engine-reviewer"
    assert answer["statement"] not in world.oe.outputs()
