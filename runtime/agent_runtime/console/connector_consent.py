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
"""

from __future__ import annotations

import hmac
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_runtime.connectors.mcp.oauth_flow import PendingConsent
from agent_runtime.oe.client_auth import Attributes, Permission, on_agents

CONSENT_TTL_S = 600.0
MAX_PENDING = 1000
COOKIE = "ae_console_consent"
COOKIE_PATH = "/console/connectors"
# The right a consent needs: the token acts for the Agent, as changing its spec would.
UPDATE_AGENT = Permission("update", "")
_AGENT = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$")


class ConsentRequest(BaseModel):
    """The form a signed-in person posts: which Agent, which connector, the MCP server's URL."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str = Field(pattern=_AGENT.pattern, max_length=317)
    connector: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    url: str = Field(pattern=r"^https?://[^\s/?#]+[^\s#]*$", max_length=2048)

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


def consent_request(form: Mapping[str, Any]) -> ConsentRequest:
    """The posted form as a `ConsentRequest`, or `BadConsentForm` naming the first wrong field."""
    wanted = {key: form.get(key) for key in ("agent", "connector", "url")}
    try:
        return ConsentRequest.model_validate(wanted)
    except ValidationError as exc:
        first = str(exc.errors()[0]["loc"][0]) if exc.errors() and exc.errors()[0]["loc"] else "agent"
        raise BadConsentForm(first, _FIXES.get(first, "check the field")) from None


@dataclass(frozen=True)
class Pending:
    """One consent begun: whose session, for what, and the flow's secret half."""

    session_id: str = field(repr=False)
    request: ConsentRequest
    flow: PendingConsent = field(repr=False)
    expires_at: float


class PendingConsents:
    """The consents begun and not yet answered, by `state`; bounded, each taken once."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, size: int = MAX_PENDING) -> None:
        self._clock = clock
        self._size = size
        self._by_state: OrderedDict[str, Pending] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_state)

    def start(self, *, session_id: str, request: ConsentRequest, flow: PendingConsent) -> Pending:
        self._expire()
        while len(self._by_state) >= self._size:
            self._by_state.popitem(last=False)  # the oldest gives way: a flood cannot pin memory
        pending = Pending(
            session_id=session_id, request=request, flow=flow, expires_at=self._clock() + CONSENT_TTL_S
        )
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


def form_page(*, csrf: str, agent: str = "", connector: str = "", url: str = "", message: str = "") -> str:
    """Start a consent: the Agent, its connector and the MCP server's URL."""
    note = f'<p class="error" id="consent-error">{escape(message)}</p>' if message else ""
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
        "</label>"
        f'<label>MCP server URL <input id="consent-url" name="url" value="{escape(url)}"></label>'
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
