"""The OE's client identity decisions (issue 28): which verb each route needs, the 401/403 bodies, the
static token's namespaces, what a TokenReview answer means, the bounded TTL cache, the settings."""

from __future__ import annotations

import pytest

from agent_runtime.oe.client_auth import (
    APPROVE,
    CANCEL,
    INTERRUPT,
    INVOKE,
    MEMORY_EXPORT,
    READ,
    ROLE_OF,
    Attributes,
    RouteNeed,
    TTLCache,
    forbidden_body,
    identity_of_review,
    impersonation,
    on_agents,
    review_audiences,
    route_need,
    static_allows,
    unauthorized_body,
)
from agent_runtime.oe.settings import ClientAuthSettings, SettingsError
from agent_runtime.oe.store.base import ExecutionRecord, Identity

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("method", "path", "need"),
    [
        ("POST", "/invoke", RouteNeed("invoke", INVOKE)),
        ("GET", "/connector-types", RouteNeed("authenticated")),
        ("GET", "/executions", RouteNeed("list", READ)),
        ("GET", "/execution/abc", RouteNeed("execution", READ)),
        ("GET", "/execution/abc/audit", RouteNeed("execution", READ)),
        ("GET", "/execution/abc/events", RouteNeed("execution", READ)),
        ("GET", "/execution/abc/drain", RouteNeed("execution", READ)),
        ("GET", "/execution/abc/interrupts/3", RouteNeed("execution", READ)),
        ("POST", "/execution/abc/cancel", RouteNeed("execution", CANCEL)),
        ("POST", "/execution/abc/interrupt", RouteNeed("execution", INTERRUPT)),
        ("POST", "/resume/abc", RouteNeed("execution", APPROVE)),
        ("POST", "/api/v1/projects/team-a/executions/abc/resume", RouteNeed("execution", APPROVE)),
        ("GET", "/api/v1/projects/team-a/reviews", RouteNeed("reviews", READ)),
        # An Agent's A2A server (issue 38): its card and JSON-RPC endpoint; each method checks its own verb.
        ("POST", "/a2a/team-a/loop/", RouteNeed("agent", INVOKE)),
        ("POST", "/a2a/team-a/loop", RouteNeed("agent", INVOKE)),
        ("GET", "/a2a/team-a/loop/.well-known/agent-card.json", RouteNeed("agent", INVOKE)),
        (
            "POST",
            "/api/v1/projects/team-a/agents/loop/memory-export-token",
            RouteNeed("agent", MEMORY_EXPORT),
        ),
    ],
)
def test_each_client_route_needs_one_verb(method: str, path: str, need: RouteNeed) -> None:
    assert route_need(method, path) == need


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/execution/abc/cancel"),  # a write verb's path read with GET is not a read
        ("POST", "/execution/abc"),
        ("DELETE", "/execution/abc"),
        ("GET", "/execution/abc/interrupts/x"),
        ("GET", "/somewhere-new"),
        ("GET", "/api/v1/projects/team-a/agents/loop/memory-export-token"),  # only POST issues one
        ("POST", "/api/v1/projects/team-a/agents/loop/memory-export-token/x"),
        ("GET", "/a2a/team-a/loop/"),  # JSON-RPC is POST only
        ("POST", "/a2a/team-a/loop/.well-known/agent-card.json"),
        ("POST", "/a2a/team-a/loop/x"),
    ],
)
def test_a_route_the_table_does_not_know_needs_something_no_one_has(method: str, path: str) -> None:
    assert route_need(method, path) is None


def test_a_memory_export_is_its_own_verb_held_by_the_reviewer_role() -> None:
    """Issue 27: reading a user's memory outside an execution is `create agents/memoryexport`, in the
    Agent's namespace on that Agent, and the 403 names the chart role that grants it."""
    attrs = on_agents(MEMORY_EXPORT, "team-a", "loop")
    assert attrs.spec() == {
        "verb": "create",
        "group": "agentengine.io",
        "resource": "agents",
        "subresource": "memoryexport",
        "namespace": "team-a",
        "name": "loop",
    }
    assert ROLE_OF[("create", "memoryexport")] == "agent-engine-reviewer"
    assert "agent-engine-reviewer" in str(forbidden_body(Identity(username="bob"), attrs))


def test_a_403_names_verb_resource_namespace_and_the_rule_that_grants_it() -> None:
    body = forbidden_body(Identity(username="alice"), on_agents(APPROVE, "team-a", "loop"))
    assert body["kind"] == "Status" and body["code"] == 403 and body["reason"] == "Forbidden"
    assert body["message"] == (
        'agents/approve "loop" is forbidden: User "alice" cannot create resource "agents/approve" in API '
        'group "agentengine.io" in the namespace "team-a"'
    )
    details = body["details"]
    assert (details["verb"], details["resource"], details["namespace"]) == (
        "create",
        "agents/approve",
        "team-a",
    )
    granted = details["grantedBy"]
    assert granted["clusterRole"] == "agent-engine-reviewer"
    assert granted["rule"] == {
        "apiGroups": ["agentengine.io"],
        "resources": ["agents/approve"],
        "verbs": ["create"],
        "resourceNames": ["loop"],
    }
    assert "RoleBinding in namespace team-a" in granted["hint"]


def test_a_403_for_impersonation_is_cluster_scoped_and_names_the_user() -> None:
    body = forbidden_body(Identity(username="alice"), impersonation("users", "mallory"))
    assert 'cannot impersonate resource "users" in API group "core" at the cluster scope' in body["message"]
    assert body["details"]["grantedBy"]["rule"] == {
        "apiGroups": [""],
        "resources": ["users"],
        "verbs": ["impersonate"],
        "resourceNames": ["mallory"],
    }
    assert "clusterRole" not in body["details"]["grantedBy"]


def test_a_401_is_a_status_without_any_token() -> None:
    body = unauthorized_body("the bearer token was not accepted")
    assert (body["kind"], body["code"], body["reason"]) == ("Status", 401, "Unauthorized")


def test_the_static_token_acts_only_in_the_namespaces_it_names() -> None:
    assert static_allows(None, on_agents(APPROVE, "anywhere"))
    assert static_allows(frozenset({"dev"}), on_agents(INVOKE, "dev"))
    assert not static_allows(frozenset({"dev"}), on_agents(INVOKE, "team-b"))
    assert not static_allows(frozenset({"dev"}), on_agents(READ, ""))  # not cluster-wide
    assert static_allows(frozenset({"dev"}), impersonation("users", "someone"))


def test_a_token_review_answer_gives_the_user_only_when_authenticated_for_our_audience() -> None:
    user = {"username": "system:serviceaccount:a:alice", "uid": "u-1", "groups": ["system:serviceaccounts"]}
    ok = {"status": {"authenticated": True, "user": user, "audiences": ["agent-engine"]}}
    assert identity_of_review(ok, ("agent-engine",)) == Identity(
        username="system:serviceaccount:a:alice", uid="u-1", groups=["system:serviceaccounts"]
    )
    assert (
        identity_of_review({"status": {"authenticated": False, "error": "expired"}}, ("agent-engine",))
        is None
    )
    other = {"status": {"authenticated": True, "user": user, "audiences": ["https://kubernetes.default.svc"]}}
    assert identity_of_review(other, ("agent-engine",)) is None
    assert identity_of_review({"status": {"authenticated": True, "user": {}}}, ("agent-engine",)) is None


def test_attributes_spec_leaves_out_empty_fields() -> None:
    assert on_agents(READ, "").spec() == {
        "verb": "get",
        "group": "agentengine.io",
        "resource": "agents",
        "subresource": "executions",
    }
    assert Attributes(verb="impersonate", group="", resource="groups", name="org").spec() == {
        "verb": "impersonate",
        "group": "",
        "resource": "groups",
        "name": "org",
    }


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_cache_forgets_an_entry_after_its_ttl() -> None:
    clock = Clock()
    cache: TTLCache[str, bool] = TTLCache(ttl_s=10.0, size=10, clock=clock)
    cache.put("k", False)
    clock.now = 9.9
    assert cache.get("k") == (True, False)  # a cached "no" is a hit too
    clock.now = 10.0
    assert cache.get("k") == (False, None)
    assert len(cache) == 0


def test_the_cache_is_bounded_and_drops_the_least_recently_used() -> None:
    cache: TTLCache[int, int] = TTLCache(ttl_s=60.0, size=3, clock=Clock())
    for key in range(3):
        cache.put(key, key)
    assert cache.get(0) == (True, 0)  # 0 is now the most recent
    cache.put(3, 3)
    assert len(cache) == 3
    assert cache.get(1) == (False, None)
    assert [cache.get(k)[0] for k in (0, 2, 3)] == [True, True, True]


def test_a_ttl_of_zero_caches_nothing() -> None:
    cache: TTLCache[str, int] = TTLCache(ttl_s=0.0, size=3, clock=Clock())
    cache.put("k", 1)
    assert cache.get("k") == (False, None)


def test_settings_choose_kubernetes_in_a_cluster_and_the_static_token_only_where_set() -> None:
    cluster = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    auth = ClientAuthSettings.from_env(cluster)
    assert (auth.kubernetes, auth.static, auth.api_url) == (True, False, "https://10.0.0.1:443")
    assert auth.audiences == ("agent-engine",) and auth.cache_ttl_s == 10.0 and auth.cache_size == 4096
    both = ClientAuthSettings.from_env({**cluster, "OE_CLIENT_TOKEN": "t"})
    assert both.kubernetes and both.static and both.static_namespaces is None
    local = ClientAuthSettings.from_env({"OE_CLIENT_TOKEN": "t", "OE_CLIENT_TOKEN_NAMESPACES": "dev, demo"})
    assert not local.kubernetes and local.static and local.static_namespaces == frozenset({"dev", "demo"})
    only = ClientAuthSettings.from_env({**cluster, "OE_CLIENT_TOKEN": "t", "OE_CLIENT_AUTH": "kubernetes"})
    assert only.kubernetes and not only.static


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"OE_CLIENT_AUTH": "ldap"}, "OE_CLIENT_AUTH"),
        ({"OE_CLIENT_AUTH": "kubernetes"}, "KUBERNETES_SERVICE_HOST"),
        (
            {"KUBERNETES_SERVICE_HOST": "h", "OE_CLIENT_AUTH_CACHE_TTL_S": "soon"},
            "OE_CLIENT_AUTH_CACHE_TTL_S",
        ),
        ({"KUBERNETES_SERVICE_HOST": "h", "OE_CLIENT_AUTH_CACHE_SIZE": "0"}, "OE_CLIENT_AUTH_CACHE_SIZE"),
        ({"KUBERNETES_SERVICE_HOST": "h", "OE_CLIENT_AUTH_AUDIENCES": " , "}, "OE_CLIENT_AUTH_AUDIENCES"),
    ],
)
def test_a_bad_client_auth_setting_names_itself(env: dict[str, str], names: str) -> None:
    with pytest.raises(SettingsError, match=names):
        ClientAuthSettings.from_env(env)


def test_an_execution_stored_before_identities_were_recorded_still_loads() -> None:
    """Migration: the identity fields are optional, so a row written by an older OE reads as 'unknown'."""
    old = (
        '{"execution_id":"e1","agent":"a/b","project_id":"a","workspace_id":"a.b","session_id":"s",'
        '"created_at":1.0,"updated_at":1.0,"reviews":[{"step":1,"kind":"approval_required",'
        '"decision":"approved","at":2.0}]}'
    )
    record = ExecutionRecord.model_validate_json(old)
    assert record.invoked_by is None and record.cancelled_by is None and record.interrupted_by == []
    assert record.reviews[0].decided_by is None


def _jwt(claims: dict[str, object]) -> str:
    import base64
    import json

    def part(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2ln"


def test_an_oidc_token_for_our_audience_is_reviewed_with_the_api_servers_audiences() -> None:
    """The API server authenticates JWT issuers' tokens only for its own audiences (audience-agnostic)."""
    issuers = frozenset({"https://idp.example"})
    ours = ("agent-engine",)
    assert (
        review_audiences(
            _jwt({"iss": "https://idp.example", "aud": "agent-engine"}), audiences=ours, oidc_issuers=issuers
        )
        == ()
    )
    assert (
        review_audiences(
            _jwt({"iss": "https://idp.example", "aud": ["x", "agent-engine"]}),
            audiences=ours,
            oidc_issuers=issuers,
        )
        == ()
    )
    # Not for us, not that issuer (a ServiceAccount token), not a JWT, or no issuer trusted: bound to ours.
    for token, trusted in (
        (_jwt({"iss": "https://idp.example", "aud": "kubernetes"}), issuers),
        (_jwt({"iss": "https://kubernetes.default.svc.cluster.local", "aud": "agent-engine"}), issuers),
        ("opaque-token", issuers),
        ("a.!!!.c", issuers),
        (_jwt({"iss": "https://idp.example", "aud": "agent-engine"}), frozenset()),
    ):
        assert review_audiences(token, audiences=ours, oidc_issuers=trusted) == ours
