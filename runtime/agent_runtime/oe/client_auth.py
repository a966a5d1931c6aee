"""Who a client of the OE is, and what it may do: the cluster's own identities and RBAC (issue 28).

A client presents a bearer token. The OE asks the API server who it is (a TokenReview, with the audience
`agent-engine` by default, so only a token minted for the OE passes) and whether that user may do what the
route needs in the Agent's namespace (a SubjectAccessReview on a subresource of `agents.agentengine.io`).
Plain Role and ClusterRole rules grant those verbs; the chart's ClusterRoles aggregate them into `edit`,
`admin` and `view`. Both answers are cached for a short, bounded time (`TTLCache`), so a steady client
pays no API round trip per request and a revoked token or binding stops working within the TTL.

The static development token (`OE_CLIENT_TOKEN`) remains for runs with no cluster (`make run`'s local
OE, the integration tier): it names the namespaces it may act in and may do anything there.

Pure decisions first (which verb a route needs, the 401/403 bodies, the cache), then the API I/O.
Nothing here logs, raises or returns a token: a token is looked up by its digest.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import re
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar

import aiohttp

from agent_runtime.oe.store.base import Identity

GROUP = "agentengine.io"
RESOURCE = "agents"
DEFAULT_AUDIENCE = "agent-engine"
DEFAULT_CACHE_TTL_S = 10.0
DEFAULT_CACHE_SIZE = 4096
STATIC_USERNAME = "agent-engine:static-token"
STATIC_IDENTITY = Identity(username=STATIC_USERNAME, groups=["agent-engine:static"])

# The ClusterRole of the chart that holds each permission (docs/oe.md, charts/.../client-rbac.yaml).
ROLE_OF = {
    ("create", "invoke"): "agent-engine-invoker",
    ("get", "executions"): "agent-engine-viewer",
    ("create", "approve"): "agent-engine-reviewer",
    ("create", "cancel"): "agent-engine-invoker",
    ("create", "interrupt"): "agent-engine-invoker",
    ("create", "memoryexport"): "agent-engine-reviewer",
}

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


# -- what is asked ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Permission:
    """A verb on a subresource of `agents.agentengine.io`."""

    verb: str
    subresource: str


INVOKE = Permission("create", "invoke")
READ = Permission("get", "executions")
APPROVE = Permission("create", "approve")
CANCEL = Permission("create", "cancel")
INTERRUPT = Permission("create", "interrupt")
# A read-only memory statement for one user of an Agent, outside any execution (a data export).
MEMORY_EXPORT = Permission("create", "memoryexport")
# An Agent's knowledge base (servers/oe_knowledge.py): writing it changes what the Agent answers, as editing
# its spec does, so it takes `update` on the Agent itself (Kubernetes' edit and admin roles); a list, `get`.
KNOWLEDGE_WRITE = Permission("update", "")
KNOWLEDGE_READ = Permission("get", "")


@dataclass(frozen=True)
class Attributes:
    """A SubjectAccessReview's `resourceAttributes`; namespace "" asks cluster-wide."""

    verb: str
    resource: str
    group: str = GROUP
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    def spec(self) -> dict[str, str]:
        out = {"verb": self.verb, "group": self.group, "resource": self.resource}
        for key in ("subresource", "namespace", "name"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out


def on_agents(permission: Permission, namespace: str, name: str = "") -> Attributes:
    return Attributes(
        verb=permission.verb,
        resource=RESOURCE,
        subresource=permission.subresource,
        namespace=namespace,
        name=name,
    )


def impersonation(kind: Literal["users", "groups"], name: str) -> Attributes:
    """Naming another `user_id` (`users`) or `org_id` (`groups`) at /invoke: Kubernetes' impersonate."""
    return Attributes(verb="impersonate", group="", resource=kind, name=name)


RouteKind = Literal["authenticated", "invoke", "agent", "list", "execution", "reviews"]


@dataclass(frozen=True)
class RouteNeed:
    """What a client route needs: `execution` routes check `permission` in the execution's namespace (after
    `get agents/executions`, so an unreadable one is a 404); `invoke` in the Agent's (from the body),
    `agent` in the Agent's (from the path); `list` and `reviews` filter to readable namespaces."""

    kind: RouteKind
    permission: Permission | None = None


_EXECUTION = re.compile(r"^/execution/[^/]+(?P<rest>/.*)?$")
_GATEWAY_RESUME = re.compile(r"^/api/v1/projects/[^/]+/executions/[^/]+/resume$")
_REVIEWS = re.compile(r"^/api/v1/projects/[^/]+/reviews$")
_MEMORY_EXPORT = re.compile(r"^/api/v1/projects/[^/]+/agents/[^/]+/memory-export-token$")
# LangGraph threads (servers/oe_threads.py): the handler checks the Agent's right itself.
_SESSIONS = re.compile(r"^/api/v1/projects/[^/]+/agents/[^/]+/sessions(/[^/]+/(messages|state|fork))?$")
_KNOWLEDGE = re.compile(r"^/api/v1/projects/[^/]+/agents/[^/]+/knowledge/documents$")
_CONNECTOR_TEST = re.compile(r"^/api/v1/projects/[^/]+/agents/[^/]+/connectors/[^/]+/test$")
# An Agent's A2A server (servers/a2a.py): its card and its JSON-RPC endpoint; each method checks its verb.
_A2A = re.compile(r"^/a2a/[^/]+/[^/]+/?$")
_A2A_CARD = re.compile(r"^/a2a/[^/]+/[^/]+/\.well-known/agent-card\.json$")
_READ_SUFFIXES = ("", "/audit", "/audit/verify", "/events", "/logs", "/drain")


def route_need(method: str, path: str) -> RouteNeed | None:
    """The permission a client route needs; None for a route this table does not know (refused: 403)."""
    method = method.upper()
    if method == "POST" and path == "/invoke":
        return RouteNeed("invoke", INVOKE)
    if method == "GET" and path == "/connector-types":
        return RouteNeed("authenticated")
    if method == "GET" and path == "/executions":
        return RouteNeed("list", READ)
    if method == "GET" and _REVIEWS.match(path):
        return RouteNeed("reviews", READ)
    if method == "GET" and _SESSIONS.match(path):
        return RouteNeed("agent", READ)
    if method == "POST" and _SESSIONS.match(path) and path.endswith("/state"):
        return RouteNeed("agent", APPROVE)
    if method == "POST" and _SESSIONS.match(path) and path.endswith("/fork"):
        return RouteNeed("agent", INVOKE)  # a fork starts an execution (servers/oe_threads.py)
    if method == "POST" and _MEMORY_EXPORT.match(path):
        return RouteNeed("agent", MEMORY_EXPORT)
    if _KNOWLEDGE.match(path) and method in ("POST", "DELETE", "GET"):
        return RouteNeed("agent", KNOWLEDGE_READ if method == "GET" else KNOWLEDGE_WRITE)
    if method == "POST" and _CONNECTOR_TEST.match(path):
        # A connector's test reaches its provider with the Agent's credential: the right to invoke it.
        return RouteNeed("agent", INVOKE)
    if (method == "POST" and _A2A.match(path)) or (method == "GET" and _A2A_CARD.match(path)):
        return RouteNeed("agent", INVOKE)
    if method == "POST" and (path.startswith("/resume/") or _GATEWAY_RESUME.match(path)):
        return RouteNeed("execution", APPROVE)
    found = _EXECUTION.match(path)
    if found is None:
        return None
    rest = found.group("rest") or ""
    if method == "GET" and (rest in _READ_SUFFIXES or re.fullmatch(r"/interrupts/\d+", rest)):
        return RouteNeed("execution", READ)
    if method == "POST" and rest == "/cancel":
        return RouteNeed("execution", CANCEL)
    if method == "POST" and rest == "/interrupt":
        return RouteNeed("execution", INTERRUPT)
    return None


# -- answers ------------------------------------------------------------------------------------------


def review_audiences(
    token: str, *, audiences: tuple[str, ...], oidc_issuers: frozenset[str]
) -> tuple[str, ...]:
    """The audiences a TokenReview of `token` names.

    The API server treats its JWT (OIDC) authenticators as audience-agnostic: it authenticates such a token
    only in a review naming one of its own API audiences, having checked the token's `aud` against the
    issuer's configured audiences itself. So a JWT whose `iss` is one of the trusted `oidc_issuers` and
    whose `aud` names one of ours is reviewed with the API server's audiences (none named); its claims,
    read here unverified, are the signed ones once the review authenticates it. Every other token (a
    ServiceAccount's above all) must be bound to one of `audiences`.
    """
    if not oidc_issuers:
        return audiences
    claims = _jwt_claims(token)
    if claims is None or claims.get("iss") not in oidc_issuers:
        return audiences
    aud = claims.get("aud")
    if isinstance(aud, str):
        named = {aud}
    elif isinstance(aud, list):
        named = {a for a in aud if isinstance(a, str)}
    else:
        named = set()
    return () if named & set(audiences) else audiences


def _jwt_claims(token: str) -> dict[str, Any] | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except (ValueError, binascii.Error):
        return None
    return claims if isinstance(claims, dict) else None


def unauthorized_body(message: str) -> dict[str, Any]:
    """A 401's Status body (sent with `WWW-Authenticate: Bearer`)."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Unauthorized",
        "code": 401,
        "message": message,
    }


def grant_rule(attrs: Attributes) -> dict[str, Any]:
    """The RBAC rule that would grant `attrs`, and the chart's ClusterRole holding it (if one does)."""
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    rule: dict[str, Any] = {"apiGroups": [attrs.group], "resources": [resource], "verbs": [attrs.verb]}
    if attrs.name:
        rule["resourceNames"] = [attrs.name]
    out: dict[str, Any] = {"rule": rule}
    role = ROLE_OF.get((attrs.verb, attrs.subresource)) if attrs.group == GROUP else None
    if role is not None:
        where = f"a RoleBinding in namespace {attrs.namespace}" if attrs.namespace else "a ClusterRoleBinding"
        out["clusterRole"] = role
        out["hint"] = f"bind ClusterRole {role} to the user with {where}"
    else:
        out["hint"] = "grant this rule to the user with a ClusterRole and a ClusterRoleBinding"
    return out


def forbidden_body(identity: Identity, attrs: Attributes) -> dict[str, Any]:
    """A 403's Status body, as the API server words its own: who, verb, resource, namespace, and the fix."""
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    group = attrs.group or "core"
    scope = f' in the namespace "{attrs.namespace}"' if attrs.namespace else " at the cluster scope"
    named = f' "{attrs.name}"' if attrs.name else ""
    message = (
        f'{resource}{named} is forbidden: User "{identity.username}" cannot {attrs.verb} resource '
        f'"{resource}" in API group "{group}"{scope}'
    )
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Forbidden",
        "code": 403,
        "message": message,
        "details": {
            "group": attrs.group,
            "kind": attrs.resource,
            "name": attrs.name or None,
            "verb": attrs.verb,
            "resource": resource,
            "namespace": attrs.namespace or None,
            "grantedBy": grant_rule(attrs),
        },
    }


def unavailable_body(message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "ServiceUnavailable",
        "code": 503,
        "message": message,
    }


# -- the cache ----------------------------------------------------------------------------------------


class TTLCache(Generic[K, V]):
    """At most `size` entries, each for `ttl_s`; the least recently used goes first when full."""

    def __init__(self, *, ttl_s: float, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        if size < 1 or ttl_s < 0:
            raise ValueError("TTLCache needs size >= 1 and ttl_s >= 0")
        self.ttl_s = ttl_s
        self.size = size
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> tuple[bool, V | None]:
        """(True, value) while fresh; (False, None) when absent or expired (then dropped)."""
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        until, value = entry
        if self._clock() >= until:
            del self._entries[key]
            return False, None
        self._entries.move_to_end(key)
        return True, value

    def put(self, key: K, value: V) -> None:
        if self.ttl_s == 0:
            return
        self._entries[key] = (self._clock() + self.ttl_s, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)


# -- callers ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """An authenticated client. `static` marks the development token (never a Kubernetes user)."""

    identity: Identity
    static: bool = False
    namespaces: frozenset[str] | None = None  # the static token's; None: every namespace

    @property
    def key(self) -> tuple[str, str, tuple[str, ...]]:
        return (self.identity.username, self.identity.uid or "", tuple(self.identity.groups))


class StaticTokenLike(Protocol):
    def accepts(self, presented: bytes) -> bool: ...


class ReviewUnavailable(Exception):
    """The API server could not answer a review; the request gets 503 and may be retried."""


class Reviewer(Protocol):
    async def token_review(self, token: str, audiences: tuple[str, ...]) -> Identity | None: ...

    async def access_review(self, identity: Identity, attrs: Attributes) -> bool: ...

    async def aclose(self) -> None: ...


class ClientAuth:
    """Authenticates a bearer token and answers access checks, through the caches."""

    def __init__(
        self,
        *,
        reviewer: Reviewer | None = None,
        static_token: StaticTokenLike | None = None,
        static_namespaces: frozenset[str] | None = None,
        audiences: tuple[str, ...] = (DEFAULT_AUDIENCE,),
        oidc_issuers: frozenset[str] = frozenset(),
        cache_ttl_s: float = DEFAULT_CACHE_TTL_S,
        cache_size: int = DEFAULT_CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if reviewer is None and static_token is None:
            raise ValueError("ClientAuth needs a reviewer (Kubernetes) or a static token")
        self.reviewer = reviewer
        self.static_token = static_token
        self.static_namespaces = static_namespaces
        self.audiences = audiences
        self.oidc_issuers = oidc_issuers
        self.identities: TTLCache[bytes, Identity | None] = TTLCache(
            ttl_s=cache_ttl_s, size=cache_size, clock=clock
        )
        self.decisions: TTLCache[tuple[Any, ...], bool] = TTLCache(
            ttl_s=cache_ttl_s, size=cache_size, clock=clock
        )

    async def authenticate(self, token: str) -> Caller | None:
        """The caller behind `token`, or None (401). Raises ReviewUnavailable when the API is down."""
        presented = token.encode("utf-8")
        if self.static_token is not None and self.static_token.accepts(presented):
            return Caller(identity=STATIC_IDENTITY, static=True, namespaces=self.static_namespaces)
        if self.reviewer is None:
            return None
        digest = hashlib.sha256(presented).digest()
        hit, identity = self.identities.get(digest)
        if not hit:
            asked = review_audiences(token, audiences=self.audiences, oidc_issuers=self.oidc_issuers)
            identity = await self.reviewer.token_review(token, asked)
            self.identities.put(digest, identity)
        return Caller(identity=identity) if identity is not None else None

    def recorded(self, identity: Identity) -> Caller:
        """The caller an execution recorded as its invoker, to ask on its behalf what it may do (a child an
        agentRef starts runs as its parent's invoker, oe/children.py): the static token's identity is that
        token's, with its namespaces, only while this OE has a static token at all."""
        if self.static_token is not None and identity == STATIC_IDENTITY:
            return Caller(identity=identity, static=True, namespaces=self.static_namespaces)
        return Caller(identity=identity)

    async def allowed(self, caller: Caller, attrs: Attributes) -> bool:
        if caller.static:
            return static_allows(caller.namespaces, attrs)
        key = (*caller.key, attrs)
        hit, answer = self.decisions.get(key)
        if hit:
            return bool(answer)
        assert self.reviewer is not None  # a non-static caller came from the reviewer
        answer = await self.reviewer.access_review(caller.identity, attrs)
        self.decisions.put(key, answer)
        return answer

    async def readable(
        self, caller: Caller, candidates: Iterable[str], *, permission: Permission = READ
    ) -> frozenset[str] | None:
        """The namespaces among `candidates` where `permission` holds; None when it holds cluster-wide."""
        if await self.allowed(caller, on_agents(permission, "")):
            return None
        names = sorted(set(candidates))
        answers = await asyncio.gather(*(self.allowed(caller, on_agents(permission, ns)) for ns in names))
        return frozenset(ns for ns, ok in zip(names, answers, strict=True) if ok)

    async def aclose(self) -> None:
        if self.reviewer is not None:
            await self.reviewer.aclose()


def static_allows(namespaces: Collection[str] | None, attrs: Attributes) -> bool:
    """The development token may do everything, impersonation included, in the namespaces it names; a
    cluster-wide question is yes only for a token that names every namespace."""
    if namespaces is None:
        return True
    if attrs.group != GROUP:
        return True  # impersonation: the dev token stands for a trusted front end
    return bool(attrs.namespace) and attrs.namespace in namespaces


# -- the Kubernetes API -------------------------------------------------------------------------------


class KubernetesReviewer:
    """TokenReview and SubjectAccessReview with the OE's own ServiceAccount token (read on every miss:
    the kubelet rotates a projected token in place)."""

    def __init__(
        self,
        *,
        api_url: str,
        token_path: str | Path,
        ca_path: str | Path | None,
        timeout_s: float = 5.0,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.token_path = Path(token_path)
        self.ca_path = Path(ca_path) if ca_path is not None else None
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | bool = True

    def _pool(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            if self.ca_path is not None:
                self._ssl = ssl.create_default_context(cafile=str(self.ca_path))
            self._session = aiohttp.ClientSession(
                timeout=self._timeout, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False
            )
        return self._session

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            token = self.token_path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ReviewUnavailable(
                f"the OE's ServiceAccount token {self.token_path} cannot be read ({type(exc).__name__})"
            ) from None
        headers = {"authorization": f"Bearer {token}", "accept": "application/json"}
        try:
            async with self._pool().post(
                self.api_url + path, json=body, headers=headers, ssl=self._ssl
            ) as response:
                if response.status != 201 and response.status != 200:
                    # The API server's own Status message names the missing permission, never a token.
                    detail = await response.text()
                    raise ReviewUnavailable(
                        f"the Kubernetes API answered {response.status} to {path.rsplit('/', 1)[-1]}: "
                        f"{_status_message(detail)}"
                    )
                answer: dict[str, Any] = await response.json()
                return answer
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise ReviewUnavailable(
                f"the Kubernetes API at {self.api_url} did not answer ({type(exc).__name__})"
            ) from None

    async def token_review(self, token: str, audiences: tuple[str, ...]) -> Identity | None:
        answer = await self._post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                # No audiences: the API server's own (see `review_audiences`).
                "spec": {"token": token, **({"audiences": list(audiences)} if audiences else {})},
            },
        )
        return identity_of_review(answer, audiences)

    async def access_review(self, identity: Identity, attrs: Attributes) -> bool:
        spec: dict[str, Any] = {
            "user": identity.username,
            "groups": identity.groups,
            "resourceAttributes": attrs.spec(),
        }
        if identity.uid:
            spec["uid"] = identity.uid
        answer = await self._post(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        return bool((answer.get("status") or {}).get("allowed"))

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def identity_of_review(answer: dict[str, Any], audiences: tuple[str, ...]) -> Identity | None:
    """The user a TokenReview's answer names, if it authenticated the token for one of `audiences`."""
    status = answer.get("status") or {}
    if not status.get("authenticated"):
        return None
    granted = status.get("audiences")
    if audiences and granted is not None and not set(granted) & set(audiences):
        return None  # a token for another audience is not a token for the OE
    user = status.get("user") or {}
    username = user.get("username")
    if not isinstance(username, str) or not username:
        return None
    groups = [g for g in user.get("groups") or [] if isinstance(g, str)]
    uid = user.get("uid") if isinstance(user.get("uid"), str) else None
    return Identity(username=username, uid=uid or None, groups=groups)


def _status_message(text: str) -> str:
    try:
        message = json.loads(text).get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message)[:300] if message else "(no message)"
