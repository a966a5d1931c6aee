"""A person's OAuth consent for an Agent's MCP connector, through the console (issue 37): the decisions.

The OE begins the authorization code + PKCE flow (`OAuthSession.begin_consent`), keeps the verifier and the
`state` here, in its own memory, bound to the console session that began it, and sends the browser to the
authorization server; the redirect comes back to `/console/connectors/callback`, where the `state` must be
one this OE handed out, to this browser (a Lax cookie carries it, as the OIDC sign-in's does), for a session
that is still signed in and may still update the Agent. Each pending consent is taken once and lives
`CONSENT_TTL_S`.

Only a caller who may `update` the Agent (`agents.agentengine.io`, named) may begin one: the token it
produces acts for that Agent. The I/O (discovery, the token request, the token file) is `app.py`'s and
`oauth_flow`'s; the pages here escape every value and carry no script.

In a cluster (`consent_cluster.py`) the connector's URL and its pinned authorization server come from the
Connector resource the Agent names, never from the form, and the OE calls only authorization servers on
its allowed list (`OE_CONNECTOR_CONSENT_ISSUERS`, the chart's `oe.connectorConsent.authorizationServers`,
which also opens the OE's egress to them): an Agent's updater cannot point the OE's requests anywhere
else. The tokens go to the Secret `mcp-oauth-NAME` the operator pre-created (`token_secret`).
"""

from __future__ import annotations

import base64
import hmac
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_runtime.connectors.mcp.oauth import (
    AUTHORIZATION_CODE,
    OAUTH,
    SEED_SECRET_LABEL,
    SEED_SECRET_PREFIX,
    CachedServer,
    canonical_resource,
    same_origin,
    same_url,
)
from agent_runtime.connectors.mcp.oauth_flow import PendingConsent
from agent_runtime.oe.client_auth import Attributes, Permission, on_agents

CONSENT_TTL_S = 600.0
MAX_PENDING = 1000
COOKIE = "ae_console_consent"
COOKIE_PATH = "/console/connectors"
# The right a consent needs: the token acts for the Agent, as changing its spec would.
UPDATE_AGENT = Permission("update", "")
_AGENT = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$")
# The pre-created token Secret's labels (the operator's consent_access.py writes the same): the OE's write
# replaces the whole Secret, so it carries them again.
MANAGED_BY = "agent-engine-operator"
ISSUERS_ENV = "OE_CONNECTOR_CONSENT_ISSUERS"


class ConsentRequest(BaseModel):
    """The form a signed-in person posts: which Agent, which connector, and (the local mode only, where
    the OE cannot read the connector's config) the MCP server's URL."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str = Field(pattern=_AGENT.pattern, max_length=317)
    connector: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    url: str | None = Field(default=None, pattern=r"^https?://[^\s/?#]+[^\s#]*$", max_length=2048)

    @property
    def namespace(self) -> str:
        return self.agent.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.agent.split("/", 1)[1]

    def needs(self) -> Attributes:
        return on_agents(UPDATE_AGENT, self.namespace, self.name)


class BadConsentForm(Exception):
    """A form field was wrong: `field` names it, `problem` says the fix."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f"{field_name}: {problem}")
        self.field = field_name
        self.problem = problem


_FIXES = {
    "agent": "name the Agent as <namespace>/<name>",
    "connector": "the connector's name: letters, digits, . _ -",
    "url": "the MCP server's http(s) URL, as in the connector's config",
}


def consent_request(form: Mapping[str, Any], *, url_typed: bool = True) -> ConsentRequest:
    """The posted form as a `ConsentRequest`, or `BadConsentForm` naming the first wrong field. `url_typed`:
    the local mode, where the form carries the URL; in a cluster a posted URL is ignored."""
    wanted = {key: form.get(key) for key in ("agent", "connector")}
    if url_typed:
        wanted["url"] = form.get("url")
        if not wanted["url"]:
            raise BadConsentForm("url", _FIXES["url"])
    try:
        return ConsentRequest.model_validate(wanted)
    except ValidationError as exc:
        first = str(exc.errors()[0]["loc"][0]) if exc.errors() and exc.errors()[0]["loc"] else "agent"
        raise BadConsentForm(first, _FIXES.get(first, "check the field")) from None


class ConsentRefused(Exception):
    """The Agent or its Connector does not allow a console consent; the message says why and the fix."""


@dataclass(frozen=True)
class ConsentTarget:
    """What a cluster consent is for, as the Connector resource says: its URL (the resource indicator),
    the pinned authorization server and the scope."""

    namespace: str
    connector: str
    url: str
    issuer: str
    scope: str | None

    @property
    def secret_name(self) -> str:
        return f"{SEED_SECRET_PREFIX}{self.connector}"


def consent_target(
    request: ConsentRequest, *, agent: Mapping[str, Any] | None, connector: Mapping[str, Any] | None
) -> ConsentTarget:
    """The consent `request` asks for, checked against the Agent and Connector resources as read (None:
    not there, or the OE may not read it: the operator grants that only for the Agent's OAuth connectors)."""
    where = f"namespace {request.namespace}"
    if agent is None:
        raise ConsentRefused(
            f"Agent {request.name} in {where} has no MCP connector waiting for consent (or does not exist); "
            "the operator lets the OE read an Agent once it names a Connector with auth.grant "
            "authorization_code"
        )
    names = (agent.get("spec") or {}).get("connectors") or []
    if request.connector not in names:
        raise ConsentRefused(
            f"Agent {request.name} does not use connector {request.connector} (its spec.connectors: "
            f"{', '.join(str(n) for n in names[:20]) or 'none'}); pick one of them"
        )
    if connector is None:
        raise ConsentRefused(
            f"Connector {request.connector} in {where} cannot be read by the OE: it is not an MCP connector "
            "with auth.grant authorization_code, or the operator has not reconciled the Agent yet; retry "
            "in a moment"
        )
    spec = connector.get("spec") or {}
    config = spec.get("config") or {}
    auth = config.get("auth") if isinstance(config.get("auth"), Mapping) else {}
    if (spec.get("source") or {}).get("type") != "mcp" or auth.get("type") != OAUTH:
        raise ConsentRefused(f"Connector {request.connector} is not an MCP connector with auth.type oauth")
    if auth.get("grant") != AUTHORIZATION_CODE:
        raise ConsentRefused(
            f"Connector {request.connector} uses auth.grant {auth.get('grant') or 'client_credentials'}: "
            "the agent's own client, no person's consent; set auth.grant authorization_code to ask for one"
        )
    url, issuer = config.get("url"), auth.get("authorization_server")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConsentRefused(f"Connector {request.connector} has no spec.config.url")
    if not isinstance(issuer, str) or not issuer:
        raise ConsentRefused(
            f"Connector {request.connector}: set spec.config.auth.authorization_server to its authorization "
            "server's issuer: in a cluster the OE asks only that server (never the MCP server) for consent"
        )
    scope = auth.get("scope") if isinstance(auth.get("scope"), str) else None
    return ConsentTarget(
        namespace=request.namespace,
        connector=request.connector,
        url=canonical_resource(url),
        issuer=issuer,
        scope=scope,
    )


def allowed_issuers(raw: str) -> tuple[str, ...]:
    """`OE_CONNECTOR_CONSENT_ISSUERS`: comma-separated issuer URLs (https, or http on loopback)."""
    issuers = tuple(part.strip() for part in raw.split(",") if part.strip())
    for issuer in issuers:
        if not re.match(r"^https?://[^\s/?#]+[^\s?#]*$", issuer):
            raise ValueError(
                f"{ISSUERS_ENV}: {issuer[:80]!r} is not an issuer URL; write each as https://host[/path]"
            )
    return issuers


def issuer_problem(issuer: str, *, allowed: tuple[str, ...]) -> str | None:
    """Why the OE will not ask `issuer` for a consent, or None: it must be on the allowed list."""
    if any(same_url(issuer, known) for known in allowed):
        return None
    return (
        f"the authorization server {issuer[:200]} is not one this OE may call; a platform admin adds it to "
        f"oe.connectorConsent.authorizationServers (which also opens the OE's egress to it)"
    )


def url_problem(issuer: str) -> Callable[[str], str | None]:
    """Every request of a cluster consent stays on the issuer's origin: its metadata, registration and
    token endpoints (metadata naming another host is refused before a request goes there)."""

    def problem(url: str) -> str | None:
        return None if same_origin(url, issuer) else "not on the authorization server's own origin"

    return problem


def token_secret(target: ConsentTarget, kept: CachedServer) -> dict[str, Any]:
    """The Secret `mcp-oauth-NAME` as the OE writes it (a whole-object update of the one the operator
    pre-created): the token file under `NAME.json`, the operator's labels kept."""
    body = kept.model_dump_json(exclude_none=True).encode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": target.secret_name,
            "namespace": target.namespace,
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY, SEED_SECRET_LABEL: target.connector},
        },
        "type": "Opaque",
        "data": {f"{target.connector}.json": base64.b64encode(body).decode()},
    }


@dataclass(frozen=True)
class Pending:
    """One consent begun: whose session, for what, and the flow's secret half."""

    session_id: str = field(repr=False)
    request: ConsentRequest
    flow: PendingConsent = field(repr=False)
    expires_at: float
    target: ConsentTarget | None = None  # a cluster consent's: where its tokens go


class PendingConsents:
    """The consents begun and not yet answered, by `state`; bounded, each taken once."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, size: int = MAX_PENDING) -> None:
        self._clock = clock
        self._size = size
        self._by_state: OrderedDict[str, Pending] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_state)

    def start(
        self, *, session_id: str, request: ConsentRequest, flow: PendingConsent,
        target: ConsentTarget | None = None,
    ) -> Pending:  # fmt: skip
        self._expire()
        while len(self._by_state) >= self._size:
            self._by_state.popitem(last=False)  # the oldest gives way: a flood cannot pin memory
        pending = Pending(
            session_id=session_id, request=request, flow=flow, expires_at=self._clock() + CONSENT_TTL_S,
            target=target,
        )  # fmt: skip
        self._by_state[flow.url_state] = pending
        return pending

    def take(self, *, state: str, cookie: str, session_id: str | None) -> Pending | None:
        """The pending consent `state` names, if this browser began it: the Lax cookie holds the same
        state, and the session cookie (when the browser sent it) is the session that began it. Removed
        when found for the right browser; a wrong answer leaves it for the right one."""
        self._expire()
        if not state or not cookie or not _equal(state, cookie):
            return None
        pending = self._by_state.get(state)
        if pending is None:
            return None
        if session_id is not None and not _equal(session_id, pending.session_id):
            return None
        del self._by_state[state]
        return pending

    def _expire(self) -> None:
        now = self._clock()
        for state in [s for s, p in self._by_state.items() if p.expires_at <= now]:
            del self._by_state[state]


def _equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


# -- pages (no script: plain forms and links, so the CSP's form-action 'self' is kept) -------------------


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} · Agent Engine</title>"
        '<link rel="stylesheet" href="/console/static/console.css"></head><body><main class="narrow">'
        f"{body}</main></body></html>"
    )


def form_page(
    *, csrf: str, agent: str = "", connector: str = "", url: str = "", message: str = "",
    url_typed: bool = True,
) -> str:  # fmt: skip
    """Start a consent: the Agent and its connector (and, the local mode only, the MCP server's URL)."""
    note = f'<p class="error" id="consent-error">{escape(message)}</p>' if message else ""
    url_field = (
        f'<label>MCP server URL <input id="consent-url" name="url" value="{escape(url)}"></label>'
        if url_typed
        else ""
    )
    return _page(
        "Connector consent",
        "<h1>Give an MCP connector your consent</h1>"
        "<p>The OE asks the connector's authorization server for a token that acts for the Agent; "
        "you need the right to update the Agent.</p>"
        f'{note}<form method="post" action="/console/connectors/consent">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
        f'<label>Agent <input id="consent-agent" name="agent" value="{escape(agent)}" '
        'placeholder="namespace/name"></label>'
        f'<label>Connector <input id="consent-connector" name="connector" value="{escape(connector)}">'
        f"</label>{url_field}"
        '<button type="submit" id="consent-start">Continue</button></form>',
    )


def continue_page(*, request: ConsentRequest, authorization_url: str) -> str:
    """A link to the authorization server (a link, not a redirect: form-action 'self' would stop one)."""
    return _page(
        "Connector consent",
        f"<h1>Consent for connector {escape(request.connector)} of {escape(request.agent)}</h1>"
        f'<p><a id="consent-continue" href="{escape(authorization_url)}">'
        "Continue to the authorization server</a></p>",
    )


def done_page(*, request: ConsentRequest) -> str:
    return _page(
        "Connector consent",
        f'<h1 id="consent-done">Consent kept for connector {escape(request.connector)}</h1>'
        f"<p>The Tool Pod of {escape(request.agent)} uses it from its next call.</p>"
        '<p><a href="/console/agents">Back to the Agents</a></p>',
    )


def refused_page(message: str) -> str:
    return _page(
        "Connector consent",
        f'<h1>Consent not kept</h1><p class="error" id="consent-error">{escape(message)}</p>'
        '<p><a href="/console/connectors/consent">Start again</a></p>',
    )
