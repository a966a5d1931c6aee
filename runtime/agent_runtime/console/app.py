"""The console's HTTP layer, mounted on the OE app as a middleware over `/console` (issue 30).

- `/console/sign-in` (GET the form, POST a bearer token), `/console/sign-out` (POST);
- the pages: `/console/inbox`, `/console/executions`, `/console/executions/{id}`,
  `/console/executions/{id}/audit`, `/console/agents` (server-rendered shells, filled by console.js);
- `/console/static/{console.js,console.css}`: the only assets, shipped in this package;
- `/console/data/{me,inbox,agents,tools}`: the console's own reads (`data.py`);
- `/console/api/<client route>`: the client API itself, called with the session's bearer token (the OE's
  client guard authenticates and authorizes it as any client's request); a state-changing request needs
  the session's CSRF token in `X-CSRF-Token` and a same-origin `Origin`, else 403.

Every response under `/console` carries the CSP and its companion headers (`headers.py`).
"""

from __future__ import annotations

import hmac
import json
import logging
import os
from collections.abc import Awaitable, Callable, Collection, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_runtime.connectors.mcp.oauth import DIR_ENV, OAuthError, OAuthSettings
from agent_runtime.connectors.mcp.oauth_flow import OAuthSession
from agent_runtime.connectors.mcp.oauth_store import TokenStore
from agent_runtime.console import connector_consent as consent
from agent_runtime.console.consent_cluster import ClusterUnavailable, ConsentCluster
from agent_runtime.console.data import BadQuery, ConsoleData
from agent_runtime.console.headers import with_security_headers
from agent_runtime.console.oidc import OIDCClient, OIDCError, OIDCSettings, PendingLogins, authorization_url
from agent_runtime.console.pages import View, oidc_done_page, shell_page, sign_in_page
from agent_runtime.console.sessions import COOKIE, LOGIN_COOKIE, Session, SessionStore, cookie_header
from agent_runtime.oe.client_auth import Caller, ClientAuth, ReviewUnavailable, route_need, unavailable_body
from agent_runtime.oe.engine import Orchestrator
from agent_runtime.oe.store.console_sessions import ConsoleSessionRows
from agent_runtime.oe.store.unavailable import RETRY_AFTER_S, StoreUnavailable
from agent_runtime.protocol import ExecutionState

logger = logging.getLogger(__name__)

PREFIX = "/console"
API_PREFIX = "/console/api"
ENABLED_ENV = "OE_CONSOLE_ENABLED"
MAX_FORM_BYTES = 64 * 1024
CSRF_HEADER = "x-csrf-token"
OIDC_COOKIE = "ae_console_oidc"
STATIC_DIR = Path(__file__).resolve().parent / "static"
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
SAFE_METHODS = ("GET", "HEAD")
# Client-API headers a browser must not smuggle through the console: the token is the session's.
_DROPPED = (b"authorization", b"cookie", CSRF_HEADER.encode())


def console_enabled(env: Mapping[str, str]) -> bool:
    """`OE_CONSOLE_ENABLED` (the chart's `oe.console.enabled`): on unless it says false."""
    raw = env.get(ENABLED_ENV, "true").strip().lower()
    if raw in ("true", "1", "yes", ""):
        return True
    if raw in ("false", "0", "no"):
        return False
    raise ValueError(f"{ENABLED_ENV} must be true or false, got {raw[:20]!r}")


def console_oidc(env: Mapping[str, str]) -> OIDCSettings | None:
    """The console's OIDC sign-in settings (`console/oidc.py`), None when not configured."""
    return OIDCSettings.from_env(env)


def _error(status: int, error: str, detail: str) -> JSONResponse:
    return JSONResponse(
        {"error": error, "detail": detail}, status_code=status, headers={"cache-control": "no-store"}
    )


def _same_origin(request: Request) -> bool:
    """A state-changing request came from this console's own pages (Origin, or Sec-Fetch-Site)."""
    origin = request.headers.get("origin")
    if origin is not None:
        return origin != "null" and urlsplit(origin).netloc == request.headers.get("host", "")
    return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")


class Console:
    """Sessions, pages, the console's reads and the gateway into the client API."""

    def __init__(
        self,
        *,
        engine: Orchestrator,
        auth: ClientAuth,
        namespaces: Callable[[], Collection[str]],
        sessions: SessionStore | None = None,
        oidc: OIDCSettings | None = None,
    ) -> None:
        self.auth = auth
        # In the OE's store when it keeps session rows, so every replica sharing it knows each session.
        rows = engine.store if isinstance(engine.store, ConsoleSessionRows) else None
        self.sessions = sessions or SessionStore(rows)
        self.oidc = OIDCClient(oidc) if oidc is not None else None
        self.logins = PendingLogins()
        self.consents = consent.PendingConsents()
        # Where a consent's tokens go: the local/dev Tool Pod's token directory (AGENTIC_MCP_OAUTH_DIR),
        # only when this OE is given one (in a cluster the Secret mcp-oauth-NAME, not written by the OE).
        self.token_env: Mapping[str, str] | None = (
            {DIR_ENV: os.environ[DIR_ENV]} if os.environ.get(DIR_ENV) else None
        )
        # Else, in a cluster: the Agent's Connector says where, the tokens go to its Secret mcp-oauth-NAME
        # (consent_cluster.py: only what the operator's Role grants the OE).
        self.cluster = ConsentCluster.from_env(os.environ) if self.token_env is None else None
        self.data = ConsoleData(engine=engine, auth=auth, namespaces=namespaces)
        self.assets = {
            path.name: (path.read_bytes(), STATIC_TYPES[path.suffix])
            for path in STATIC_DIR.iterdir()
            if path.suffix in STATIC_TYPES
        }
        self.router = Router(
            routes=[
                Route(PREFIX, self.home, methods=["GET"]),
                Route(PREFIX + "/", self.home, methods=["GET"]),
                Route(PREFIX + "/sign-in", self.sign_in_form, methods=["GET"]),
                Route(PREFIX + "/sign-in", self.sign_in, methods=["POST"]),
                Route(PREFIX + "/sign-out", self.sign_out, methods=["POST"]),
                Route(PREFIX + "/oidc/start", self.oidc_start, methods=["GET"]),
                Route(PREFIX + "/oidc/callback", self.oidc_callback, methods=["GET"]),
                Route(PREFIX + "/static/{name}", self.static, methods=["GET"]),
                Route(PREFIX + "/connectors/consent", self.consent_form, methods=["GET"]),
                Route(PREFIX + "/connectors/consent", self.consent_start, methods=["POST"]),
                Route(PREFIX + "/connectors/callback", self.consent_callback, methods=["GET"]),
                Route(PREFIX + "/inbox", self.page("inbox", "Inbox"), methods=["GET"]),
                Route(PREFIX + "/executions", self.page("executions", "Executions"), methods=["GET"]),
                Route(
                    PREFIX + "/executions/{execution_id}",
                    self.page("execution", "Execution"),
                    methods=["GET"],
                ),
                Route(
                    PREFIX + "/executions/{execution_id}/audit",
                    self.page("audit", "Audit records"),
                    methods=["GET"],
                ),
                Route(PREFIX + "/agents", self.page("agents", "Agents and connectors"), methods=["GET"]),
                Route(PREFIX + "/data/me", self.read(self.me), methods=["GET"]),
                Route(PREFIX + "/data/inbox", self.read(self.inbox), methods=["GET"]),
                Route(PREFIX + "/data/agents", self.read(self.agents), methods=["GET"]),
                Route(PREFIX + "/data/tools", self.read(self.tools), methods=["GET"]),
                Route(PREFIX + "/data/events", self.read(self.events), methods=["GET"]),
                Route(PREFIX + "/data/executions", self.read(self.executions), methods=["GET"]),
            ]
        )

    # sessions -------------------------------------------------------------------------------------------

    async def session(self, request: Request) -> Session | None:
        return await self.sessions.get(request.cookies.get(COOKIE))

    async def home(self, request: Request) -> Response:
        target = "/console/inbox" if await self.session(request) is not None else "/console/sign-in"
        return RedirectResponse(target, status_code=303)

    def _sign_in_answer(self, *, message: str = "", status: int = 200) -> Response:
        login_csrf = os.urandom(24).hex()
        response = HTMLResponse(
            sign_in_page(login_csrf=login_csrf, message=message, oidc=self.oidc is not None),
            status_code=status,
            headers={"cache-control": "no-store"},
        )
        response.headers.append(
            "set-cookie", cookie_header(LOGIN_COOKIE, login_csrf, max_age=1800, path=PREFIX + "/sign-in")
        )
        return response

    async def sign_in_form(self, request: Request) -> Response:
        return self._sign_in_answer()

    async def _json_body(self, request: Request) -> dict[str, Any] | None:
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_FORM_BYTES:
                return None
        try:
            body = json.loads(raw or b"{}")
        except (UnicodeDecodeError, ValueError):
            return None
        return body if isinstance(body, dict) else None

    def _sign_in_refused(self, message: str, status: int) -> Response:
        return JSONResponse({"error": "sign_in", "detail": message}, status_code=status)

    async def sign_in(self, request: Request) -> Response:
        """A pasted bearer token (JSON `{token, login_csrf}` from the sign-in page's script): checked as the
        client API checks it; a session is made only if it passes."""
        body = await self._json_body(request)
        if body is None:
            return self._sign_in_refused('send {"token": "...", "login_csrf": "..."} as JSON', 400)
        expected = request.cookies.get(LOGIN_COOKIE, "")
        presented = body.get("login_csrf")
        if (
            not expected
            or not isinstance(presented, str)
            or not _same_origin(request)
            or not _constant_equal(expected, presented)
        ):
            return self._sign_in_refused(
                "This sign-in form expired or came from another site; reload the page and sign in again.", 403
            )
        token = body.get("token")
        token = token.strip() if isinstance(token, str) else ""
        if not token:
            return self._sign_in_refused("Paste a bearer token to sign in.", 400)
        try:
            caller = await self.auth.authenticate(token)
        except ReviewUnavailable as exc:
            return self._sign_in_refused(f"Cannot verify the token right now: {exc}", 503)
        if caller is None:
            audiences = ", ".join(self.auth.audiences)
            return self._sign_in_refused(
                "The token was not accepted: unknown, expired or revoked, or not issued for the "
                f"audience {audiences}.",
                401,
            )
        session_id, _ = await self.sessions.create(token=token, username=caller.identity.username)
        response = JSONResponse({"next": "/console/inbox"}, headers={"cache-control": "no-store"})
        response.headers.append(
            "set-cookie", cookie_header(COOKIE, session_id, max_age=int(self.sessions.ttl_s))
        )
        response.headers.append(
            "set-cookie", cookie_header(LOGIN_COOKIE, "", max_age=0, path=PREFIX + "/sign-in")
        )
        return response

    async def sign_out(self, request: Request) -> Response:
        """Ends the session (the page's script sends this session's CSRF token in the header)."""
        session = await self.session(request)
        if session is not None and not session.csrf_matches(request.headers.get(CSRF_HEADER)):
            return _error(403, "csrf", "sign-out needs this session's CSRF token from a console page")
        await self.sessions.drop(request.cookies.get(COOKIE))
        response = JSONResponse({"next": "/console/sign-in"})
        response.headers.append("set-cookie", cookie_header(COOKIE, "", max_age=0))
        return response

    # OIDC (authorization code with PKCE) ---------------------------------------------------------------

    async def oidc_start(self, request: Request) -> Response:
        """Send the browser to the issuer, with a one-time state, nonce and S256 code challenge."""
        if self.oidc is None:
            return _error(404, "not_found", "this console has no OIDC sign-in (OE_CONSOLE_OIDC_ISSUER)")
        try:
            authorize, _ = await self.oidc.endpoints()
        except OIDCError as exc:
            return self._sign_in_answer(message=f"Cannot reach the identity provider: {exc}", status=503)
        redirect_uri = f"{request.url.scheme}://{request.headers.get('host', '')}{PREFIX}/oidc/callback"
        login = self.logins.start(redirect_uri=redirect_uri)
        response = RedirectResponse(authorization_url(authorize, self.oidc.settings, login), status_code=303)
        # Lax, not Strict: the issuer's redirect back is a cross-site navigation that must carry it.
        response.headers.append(
            "set-cookie",
            f"{OIDC_COOKIE}={login.state}; Path={PREFIX}/oidc; Max-Age=600; HttpOnly; Secure; SameSite=Lax",
        )
        return response

    async def oidc_callback(self, request: Request) -> Response:
        """The issuer's answer: the state must be this browser's, the code is redeemed with the verifier."""
        if self.oidc is None:
            return _error(404, "not_found", "this console has no OIDC sign-in (OE_CONSOLE_OIDC_ISSUER)")
        query = request.query_params
        if query.get("error"):
            return self._sign_in_answer(
                message=f"The identity provider refused: {query['error'][:100]}", status=401
            )
        state, code = query.get("state", ""), query.get("code", "")
        cookie = request.cookies.get(OIDC_COOKIE, "")
        login = self.logins.take(state) if state and cookie and _constant_equal(state, cookie) else None
        if login is None or not code:
            return self._sign_in_answer(
                message="This sign-in expired or did not start in this browser; sign in again.", status=403
            )
        try:
            id_token = await self.oidc.redeem(code, login)
            caller = await self.auth.authenticate(id_token)
        except OIDCError as exc:
            return self._sign_in_answer(message=f"The sign-in failed: {exc}", status=401)
        except ReviewUnavailable as exc:
            return self._sign_in_answer(message=f"Cannot verify the token right now: {exc}", status=503)
        if caller is None:
            return self._sign_in_answer(
                message="The identity provider's token was not accepted by the cluster for this OE.",
                status=401,
            )
        session_id, _ = await self.sessions.create(token=id_token, username=caller.identity.username)
        # A page, not a redirect: this response ends a cross-site navigation, and the SameSite=Strict session
        # cookie rides only on the same-site navigation the page's script starts.
        response = HTMLResponse(oidc_done_page(), headers={"cache-control": "no-store"})
        response.headers.append(
            "set-cookie", cookie_header(COOKIE, session_id, max_age=int(self.sessions.ttl_s))
        )
        response.headers.append(
            "set-cookie", cookie_header(OIDC_COOKIE, "", max_age=0, path=PREFIX + "/oidc")
        )
        return response

    # an MCP connector's OAuth consent (connector_consent.py) -------------------------------------------

    def _consent_answer(self, body: str, *, status: int = 200) -> Response:
        return HTMLResponse(body, status_code=status, headers={"cache-control": "no-store"})

    async def consent_form(self, request: Request) -> Response:
        session = await self.session(request)
        if session is None:
            return RedirectResponse("/console/sign-in", status_code=303)
        query = request.query_params
        return self._consent_answer(
            consent.form_page(
                csrf=session.csrf,
                agent=query.get("agent", "")[:317],
                connector=query.get("connector", "")[:128],
                url=query.get("url", "")[:2048],
                url_typed=self.cluster is None,
            )
        )

    async def _may_update(self, token: str, wanted: consent.ConsentRequest) -> bool | None:
        """True/False: whether the session's token may update the Agent; None: the token is not accepted."""
        caller = await self.auth.authenticate(token)
        if caller is None:
            return None
        return await self.auth.allowed(caller, wanted.needs())

    async def consent_start(self, request: Request) -> Response:
        """Begin: the form's CSRF token, the right to update the Agent, then discovery and the PKCE URL."""
        session_id = request.cookies.get(COOKIE)
        session = await self.sessions.get(session_id)
        if session is None or session_id is None:
            return RedirectResponse("/console/sign-in", status_code=303)
        raw = await request.body()
        if len(raw) > MAX_FORM_BYTES:
            return self._consent_answer(consent.refused_page("the form is too large"), status=413)
        form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()}
        if not (session.csrf_matches(form.get("csrf")) and _same_origin(request)):
            return _error(
                403, "csrf", "starting a consent needs this session's CSRF token from a console page"
            )
        try:
            wanted = consent.consent_request(form, url_typed=self.cluster is None)
        except consent.BadConsentForm as exc:
            page = consent.form_page(
                csrf=session.csrf,
                agent=form.get("agent", "")[:317],
                connector=form.get("connector", "")[:128],
                url=form.get("url", "")[:2048],
                message=f"{exc.field}: {exc.problem}",
                url_typed=self.cluster is None,
            )
            return self._consent_answer(page, status=400)
        try:
            may = await self._may_update(session.token, wanted)
        except ReviewUnavailable as exc:
            return JSONResponse(unavailable_body(f"cannot check access: {exc}"), status_code=503)
        if may is None:
            return RedirectResponse("/console/sign-in", status_code=303)
        if not may:
            return self._consent_answer(
                consent.refused_page(
                    f"You may not update Agent {wanted.agent}, so you may not give its connectors consent "
                    f"(needs update on agents.agentengine.io {wanted.name} in namespace {wanted.namespace})."
                ),
                status=403,
            )
        target: consent.ConsentTarget | None = None
        if self.cluster is not None:
            try:
                target = await self._cluster_target(wanted)
            except consent.ConsentRefused as exc:
                return self._consent_answer(consent.refused_page(str(exc)), status=400)
            except ClusterUnavailable as exc:
                return self._consent_answer(consent.refused_page(str(exc)), status=503)
        elif self.token_env is None:
            return self._consent_answer(
                consent.refused_page(
                    f"This OE keeps no MCP OAuth tokens ({DIR_ENV} is not set, and it runs in no cluster). "
                    f"Run `agentengine connectors login {wanted.connector} --url URL` and give the Tool Pod "
                    "the file it writes."
                ),
                status=501,
            )
        redirect_uri = f"{request.url.scheme}://{request.headers.get('host', '')}{PREFIX}/connectors/callback"
        try:
            flow = await self._oauth(wanted, target).begin_consent(
                redirect_uri=redirect_uri, issuer=target.issuer if target is not None else None
            )
        except OAuthError as exc:
            return self._consent_answer(consent.refused_page(exc.explanation), status=502)
        self.consents.start(session_id=session_id, request=wanted, flow=flow, target=target)
        response = self._consent_answer(consent.continue_page(request=wanted, authorization_url=flow.url))
        # Lax, not Strict: the authorization server's redirect back is a cross-site navigation.
        response.headers.append(
            "set-cookie",
            f"{consent.COOKIE}={flow.url_state}; Path={consent.COOKIE_PATH}; "
            f"Max-Age={int(consent.CONSENT_TTL_S)}; HttpOnly; Secure; SameSite=Lax",
        )
        return response

    async def _cluster_target(self, wanted: consent.ConsentRequest) -> consent.ConsentTarget:
        """The Agent's Connector as the API server has it (the URL and issuer are never the form's), its
        issuer on this OE's allowed list."""
        assert self.cluster is not None
        agent = await self.cluster.agent(wanted.namespace, wanted.name)
        connector = await self.cluster.connector(wanted.namespace, wanted.connector)
        target = consent.consent_target(wanted, agent=agent, connector=connector)
        if problem := consent.issuer_problem(target.issuer, allowed=self.cluster.issuers):
            raise consent.ConsentRefused(f"Connector {target.connector}: {problem}")
        return target

    def _oauth(self, wanted: consent.ConsentRequest, target: consent.ConsentTarget | None) -> OAuthSession:
        if target is not None:  # a cluster consent: nothing is kept on this OE's disk
            settings = OAuthSettings(
                grant="authorization_code", scope=target.scope, authorization_server=target.issuer
            )
            return OAuthSession(
                server=target.connector, mcp_url=target.url, settings=settings,
                store=TokenStore(target.connector, env={}), url_problem=consent.url_problem(target.issuer),
            )  # fmt: skip
        store = TokenStore(wanted.connector, env=self.token_env or {})
        settings = OAuthSettings(grant="authorization_code")
        return OAuthSession(server=wanted.connector, mcp_url=wanted.url or "", settings=settings, store=store)

    async def consent_callback(self, request: Request) -> Response:
        """The authorization server's answer: this browser's state, a live session still allowed to update
        the Agent, then the code exchanged (with `resource`) and the tokens written to the token file."""
        query = request.query_params
        pending = self.consents.take(
            state=query.get("state", ""),
            cookie=request.cookies.get(consent.COOKIE, ""),
            session_id=request.cookies.get(COOKIE),
        )
        if pending is None:
            return self._consent_answer(
                consent.refused_page(
                    "This answer is not for a consent begun in this browser (the state does not match, or "
                    "it expired); start the consent again."
                ),
                status=400,
            )
        session = await self.sessions.get(pending.session_id)
        if session is None:
            return self._consent_answer(
                consent.refused_page("The console session that began this consent ended; sign in again."),
                status=401,
            )
        if query.get("error"):
            said = "".join(c for c in query["error"][:40] if c.isalnum() or c == "_")
            return self._consent_answer(
                consent.refused_page(f"The authorization server refused the consent ({said})."), status=400
            )
        code = query.get("code", "")
        if not code or len(code) > 4096:
            return self._consent_answer(consent.refused_page("The answer holds no code."), status=400)
        try:
            may = await self._may_update(session.token, pending.request)
        except ReviewUnavailable as exc:
            return JSONResponse(unavailable_body(f"cannot check access: {exc}"), status_code=503)
        if not may:
            return self._consent_answer(
                consent.refused_page(f"You may no longer update Agent {pending.request.agent}."), status=403
            )
        oauth = self._oauth(pending.request, pending.target)
        try:
            if pending.target is None:
                await oauth.finish_consent(pending.flow, code=code)
            else:
                assert self.cluster is not None
                kept = await oauth.exchange_consent(pending.flow, code=code)
                secret = consent.token_secret(pending.target, kept)
                await self.cluster.write_token_secret(pending.target, secret)
        except OAuthError as exc:
            return self._consent_answer(consent.refused_page(exc.explanation), status=502)
        except ClusterUnavailable as exc:
            return self._consent_answer(consent.refused_page(str(exc)), status=503)
        logger.info(
            "mcp connector consent kept",
            extra={"agent": pending.request.agent, "connector": pending.request.connector,
                   "user": session.username},
        )  # fmt: skip
        response = self._consent_answer(consent.done_page(request=pending.request))
        response.headers.append(
            "set-cookie", cookie_header(consent.COOKIE, "", max_age=0, path=consent.COOKIE_PATH)
        )
        return response

    # pages ----------------------------------------------------------------------------------------------

    def page(self, name: str, title: str) -> Callable[[Request], Awaitable[Response]]:
        async def render(request: Request) -> Response:
            session = await self.session(request)
            if session is None:
                return RedirectResponse("/console/sign-in", status_code=303)
            view = View(page=name, title=title, execution_id=request.path_params.get("execution_id", ""))
            return HTMLResponse(
                shell_page(view, username=session.username, csrf=session.csrf),
                headers={"cache-control": "no-store"},
            )

        return render

    async def static(self, request: Request) -> Response:
        asset = self.assets.get(request.path_params["name"])
        if asset is None:
            return _error(404, "not_found", "no such console asset")
        body, media_type = asset
        return Response(body, media_type=media_type, headers={"cache-control": "no-cache"})

    # the console's reads --------------------------------------------------------------------------------

    def read(
        self, handler: Callable[[Request, Caller], Awaitable[dict[str, Any]]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def answered(request: Request) -> Response:
            session = await self.session(request)
            if session is None:
                return _error(
                    401, "signed_out", "the console session ended; sign in again at /console/sign-in"
                )
            try:
                caller = await self.auth.authenticate(session.token)
                if caller is None:
                    await self.sessions.drop(request.cookies.get(COOKIE))
                    return _error(
                        401, "signed_out", "the session's token is no longer accepted; sign in again"
                    )
                body = await handler(request, caller)
            except ReviewUnavailable as exc:
                return JSONResponse(unavailable_body(f"cannot check access: {exc}"), status_code=503)
            except BadQuery as exc:
                return JSONResponse(
                    {"detail": [{"field": exc.field, "problem": exc.problem}]}, status_code=400
                )
            except LookupError as exc:
                return _error(404, "not_found", f"no Agent or execution {str(exc)[:256]!r} that you may read")
            return JSONResponse(body, headers={"cache-control": "no-store"})

        return answered

    async def me(self, request: Request, caller: Caller) -> dict[str, Any]:
        return await self.data.me(caller)

    async def inbox(self, request: Request, caller: Caller) -> dict[str, Any]:
        query = request.query_params
        raw_limit = query.get("limit", "50")
        if not raw_limit.isascii() or not raw_limit.isdigit() or not 1 <= int(raw_limit) <= 200:
            raise BadQuery("limit", "must be a whole number from 1 to 200")
        cursor = query.get("cursor") or None
        if cursor is not None and len(cursor) > 2048:
            raise BadQuery("cursor", "not a cursor this list returned; send next_cursor as given")
        return await self.data.inbox(
            caller,
            namespace=query.get("namespace") or None,
            agent=query.get("agent") or None,
            limit=int(raw_limit),
            cursor=cursor,
        )

    async def executions(self, request: Request, caller: Caller) -> dict[str, Any]:
        query = request.query_params
        raw_limit = query.get("limit", "50")
        if not raw_limit.isascii() or not raw_limit.isdigit() or not 1 <= int(raw_limit) <= 200:
            raise BadQuery("limit", "must be a whole number from 1 to 200")
        invoked_by = query.get("invoked_by", "").strip()
        if not 0 < len(invoked_by) <= 256:
            raise BadQuery("invoked_by", "name (part of) the user who invoked, 1 to 256 characters")
        raw_status = query.get("status") or None
        try:
            status = ExecutionState(raw_status) if raw_status else None
        except ValueError:
            states = ", ".join(s.value for s in ExecutionState)
            raise BadQuery("status", f"must be one of {states}") from None
        cursor = query.get("cursor") or None
        if cursor is not None and len(cursor) > 2048:
            raise BadQuery("cursor", "not a cursor this list returned; send next_cursor as given")
        return await self.data.executions(
            caller,
            agent=query.get("agent") or None,
            status=status,
            invoked_by=invoked_by,
            limit=int(raw_limit),
            cursor=cursor,
        )

    async def agents(self, request: Request, caller: Caller) -> dict[str, Any]:
        return await self.data.agents(caller, namespace=request.query_params.get("namespace") or None)

    async def events(self, request: Request, caller: Caller) -> dict[str, Any]:
        execution_id = request.query_params.get("execution", "")
        if not 0 < len(execution_id) <= 256:
            raise BadQuery("execution", "name the execution by its id")
        return await self.data.events(caller, execution_id=execution_id)

    async def tools(self, request: Request, caller: Caller) -> dict[str, Any]:
        agent = request.query_params.get("agent", "")
        if "/" not in agent:
            raise BadQuery("agent", "name the Agent as <namespace>/<name>")
        return await self.data.tools(caller, agent=agent)

    # the client API, as the signed-in person ------------------------------------------------------------

    async def gateway(self, scope: Scope, receive: Receive, send: Send, *, inner: ASGIApp) -> None:
        """Forward `/console/api/<route>` to the client route `<route>` with the session's bearer token."""
        request = Request(scope, receive)
        session = await self.session(request)
        method = str(scope["method"]).upper()
        path = str(scope["path"])[len(API_PREFIX) :] or "/"
        if session is None:
            answer: Response = _error(
                401, "signed_out", "the console session ended; sign in again at /console/sign-in"
            )
        elif method not in SAFE_METHODS and not (
            session.csrf_matches(request.headers.get(CSRF_HEADER)) and _same_origin(request)
        ):
            answer = _error(
                403, "csrf", "a state-changing request needs this session's CSRF token from a console page"
            )
        elif route_need(method, path) is None:
            answer = _error(404, "not_found", f"the client API has no {method} {path[:200]}")
        else:
            headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _DROPPED]
            headers.append((b"authorization", b"Bearer " + session.token.encode("utf-8")))
            forwarded = {**scope, "path": path, "raw_path": path.encode("utf-8"), "headers": headers}
            await inner(forwarded, receive, send)
            return
        await answer(scope, receive, send)


def _constant_equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


class ConsoleMiddleware:
    """Serves `/console...` (with the security headers on every answer); everything else passes through."""

    def __init__(self, app: ASGIApp, *, console: Console) -> None:
        self.app = app
        self.console = console

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return

        started = False

        async def secured(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": with_security_headers(list(message.get("headers", [])))}
            await send(message)

        try:
            if path.startswith(API_PREFIX + "/"):
                await self.console.gateway(scope, receive, secured, inner=self.app)
            else:
                await self.console.router(scope, receive, secured)
        except StoreUnavailable:
            if started:
                raise
            # The sessions are in the store: while it is away no session can be looked up.
            answer = JSONResponse(
                unavailable_body("the OE's store is unavailable, so the session cannot be checked; retry"),
                status_code=503,
                headers={"retry-after": str(RETRY_AFTER_S)},
            )
            await answer(scope, receive, secured)


def mount_console(
    app: Starlette,
    *,
    engine: Orchestrator,
    auth: ClientAuth,
    namespaces: Callable[[], Collection[str]],
    oidc: OIDCSettings | None = None,
) -> Console:
    """Serve the console on `app` under `/console` (the OE's own listener, its own client auth)."""
    console = Console(engine=engine, auth=auth, namespaces=namespaces, oidc=oidc)
    app.add_middleware(ConsoleMiddleware, console=console)
    return console
