"""OAuth 2.1 for MCP servers, the I/O: discovery, registration, token requests, the loopback login.

`OAuthSession.token()` is what the Tool Pod asks per call: the kept access token while it has more than a
minute left, else a new one got under the token file's lock (refresh token first, `client_credentials`
when that is the grant), written back before the lock is released. `token(rejected=...)` after a 401 does
the same unless another process already replaced the refused token. `login()` is the person's consent for
`agentengine connectors login`: authorization code with PKCE S256 through a redirect to a one-shot listener
on 127.0.0.1.

Requests go through httpx with no redirects followed, nothing taken from the environment (proxies,
netrc), bounded answers and one budget per request. Errors name the step and the fix; never a token, a
secret, or a URL (one may hold a secret).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from agent_runtime import __version__
from agent_runtime.connectors.mcp.oauth import (
    AUTHORIZATION_CODE,
    CLIENT_CREDENTIALS,
    MAX_METADATA_BYTES,
    CachedServer,
    OAuthError,
    OAuthSettings,
    ServerMetadata,
    TokenSet,
    authorization_url,
    canonical_resource,
    challenge_params,
    check_secret_pinned,
    choose_issuer,
    parse_protected_resource,
    parse_server_metadata,
    pkce_pair,
    protected_resource_urls,
    registration_body,
    same_url,
    server_metadata_urls,
    token_error,
    token_form,
    token_set,
    usable_token,
)
from agent_runtime.connectors.mcp.oauth_store import TokenStore

_PROBE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "agent-engine", "version": __version__},
    },
}
_CALLBACK_PATH = "/callback"
_MAX_CALLBACK_BYTES = 16 * 1024
_PAGE = (
    "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {length}\r\n"
    "Connection: close\r\nCache-Control: no-store\r\n\r\n{body}"
)


@dataclass(frozen=True)
class PendingConsent:
    """A consent begun and not yet answered: kept by whoever begun it, never shown (the verifier)."""

    server: CachedServer
    verifier: str = field(repr=False)
    url_state: str = field(repr=False)
    redirect_uri: str
    url: str = field(repr=False)
    configured_client: bool = False


class OAuthSession:
    """One MCP server's OAuth state in this process: the token file does the remembering."""

    def __init__(
        self,
        *,
        server: str,
        mcp_url: str,
        settings: OAuthSettings,
        store: TokenStore,
        ssl_context: ssl.SSLContext | None = None,
        timeout_s: float = 30.0,
        clock: Callable[[], float] = time.time,
        host_problem: Callable[[str], str | None] | None = None,
        url_problem: Callable[[str], str | None] | None = None,
    ) -> None:
        self.server = server
        self.mcp_url = mcp_url
        self.settings = settings
        self.store = store
        self.timeout_s = timeout_s
        self._ssl = ssl_context
        self._clock = clock
        # What a caller refuses to reach (the operator: cloud metadata addresses), checked for every URL
        # discovery hands it, so metadata cannot steer a request there.
        self._host_problem = host_problem
        # What a caller refuses by the whole URL (the OE's console: anything but its allowed issuers).
        self._url_problem = url_problem
        self._fitted: tuple[CachedServer, bool] | None = None

    # -- the Tool Pod's side ----------------------------------------------------------------------------

    async def token(
        self, *, client_id: str | None = None, client_secret: str | None = None, rejected: str | None = None
    ) -> str:
        """An access token for this server (see the module's docstring)."""
        check_secret_pinned(self.settings, client_secret if client_id else None)
        kept = self._current(self.store.read(), rejected)
        if kept is not None:
            return kept
        async with self.store.locked(timeout_s=self.timeout_s):
            state = self.store.read()  # again: whoever held the lock before us may have refreshed
            kept = self._current(state, rejected)
            if kept is not None:
                return kept
            async with self._client() as http:
                state = await self._ready(http, state, client_id=client_id, client_secret=client_secret)
                secret = client_secret if client_id else state.client_secret
                tokens = await self._obtain(http, state, client_secret=secret)
            self.store.write(state.model_copy(update={"tokens": tokens}))
            return tokens.access_token

    def _current(self, state: CachedServer | None, rejected: str | None) -> str | None:
        if state is None or not self._fits(state):
            return None
        return usable_token(state.tokens, now=self._clock(), rejected=rejected)

    def _fits(self, state: CachedServer) -> bool:
        """The kept state is for this server (and the pinned issuer): a changed config starts again.
        Remembered for the state last seen (the store hands back the same object while the file is
        unchanged)."""
        if self._fitted is not None and self._fitted[0] is state:
            return self._fitted[1]
        pinned = self.settings.authorization_server
        fits = same_url(state.resource, self.mcp_url) and (pinned is None or same_url(state.issuer, pinned))
        self._fitted = (state, fits)
        return fits

    async def _ready(
        self, http: httpx.AsyncClient, state: CachedServer | None, *, client_id: str | None,
        client_secret: str | None,
    ) -> CachedServer:  # fmt: skip
        """Discovered and with a client: a configured client id wins, else a registered one is kept."""
        if state is None or not self._fits(state):
            if self.settings.grant == AUTHORIZATION_CODE:
                raise self._login_needed()
            state = await self._discover(http)
        if client_id:
            return state.model_copy(
                update={"client_id": client_id, "client_secret": None, "registered": False}
            )
        if state.client_id:
            return state
        if state.registration_endpoint is None:
            raise OAuthError(
                f"the authorization server of connector {self.server} offers no dynamic client "
                "registration; put client_id (and client_secret) in the connector's credential Secret",
                category="client_error",
            )
        return await self._register(http, state, redirect_uri=None)

    async def _obtain(
        self, http: httpx.AsyncClient, state: CachedServer, *, client_secret: str | None
    ) -> TokenSet:
        previous = state.tokens
        if previous is not None and previous.refresh_token:
            form = token_form(
                "refresh_token", client_id=state.client_id or "", client_secret=client_secret,
                resource=state.resource, refresh_token=previous.refresh_token,
            )  # fmt: skip
            try:
                return await self._token_request(http, state, form, previous=previous)
            except OAuthError:
                if self.settings.grant != CLIENT_CREDENTIALS:
                    raise
        if self.settings.grant == CLIENT_CREDENTIALS:
            form = token_form(
                CLIENT_CREDENTIALS, client_id=state.client_id or "", client_secret=client_secret,
                resource=state.resource, scope=self.settings.scope,
            )  # fmt: skip
            return await self._token_request(http, state, form, previous=None)
        raise self._login_needed()

    def _login_needed(self) -> OAuthError:
        return OAuthError(
            f"connector {self.server} needs a person's consent: run `agentengine connectors login "
            f"{self.server} --url URL` and give the Tool Pod the token file it writes",
        )

    # -- a person's consent (the CLI) -------------------------------------------------------------------

    async def login(
        self,
        *,
        open_url: Callable[[str], None],
        client_id: str | None = None,
        client_secret: str | None = None,
        port: int = 0,
        wait_s: float = 300.0,
    ) -> CachedServer:
        """Authorization code with PKCE: `open_url` shows the consent page's URL; the browser comes back to
        http://127.0.0.1:PORT/callback; the code is exchanged and the tokens kept. Returns what was kept."""
        check_secret_pinned(self.settings, client_secret if client_id else None)
        callback = _Callback()
        listener = await asyncio.start_server(callback.handle, host="127.0.0.1", port=port)
        try:
            bound = listener.sockets[0].getsockname()[1]
            pending = await self.begin_consent(
                redirect_uri=f"http://127.0.0.1:{bound}{_CALLBACK_PATH}", client_id=client_id
            )
            callback.expected_state = pending.url_state
            open_url(pending.url)
            try:
                code = await asyncio.wait_for(callback.code, timeout=wait_s)
            except TimeoutError:
                raise OAuthError(f"no consent came back within {wait_s:g} s", category="timeout") from None
            return await self.finish_consent(pending, code=code, client_secret=client_secret)
        finally:
            listener.close()
            await listener.wait_closed()

    async def begin_consent(
        self, *, redirect_uri: str, client_id: str | None = None, issuer: str | None = None
    ) -> PendingConsent:
        """The first half of a person's consent, for any redirect target (the CLI's loopback listener, the
        OE console's callback): discovery, a client, and the PKCE S256 authorization URL. The caller keeps
        the returned `PendingConsent` (it holds the verifier) and matches the redirect's `state` itself.

        `issuer` (the OE console in a cluster: the connector's pinned `auth.authorization_server`): only
        that authorization server's metadata is fetched, the MCP server is never asked, and the resource
        indicator is the connector's URL, so the process needs no route to the MCP server at all."""
        async with self._client() as http:
            if issuer is None:
                state = await self._discover(http, grant=AUTHORIZATION_CODE)
            else:
                meta = await self._issuer_metadata(http, issuer, grant=AUTHORIZATION_CODE)
                state = _cached(meta, resource=canonical_resource(self.mcp_url), grant=AUTHORIZATION_CODE)
            if client_id:
                state = state.model_copy(update={"client_id": client_id, "registered": False})
            elif state.registration_endpoint is not None:
                state = await self._register(http, state, redirect_uri=redirect_uri)
            else:
                raise OAuthError(
                    "the authorization server offers no dynamic client registration; configure a client_id "
                    f"(with the redirect URI {redirect_uri} registered)",
                    category="client_error",
                )
        verifier, challenge = pkce_pair()
        url_state = secrets.token_urlsafe(24)
        url = authorization_url(
            state.authorization_endpoint or "",
            client_id=state.client_id or "",
            redirect_uri=redirect_uri,
            challenge=challenge,
            state=url_state,
            resource=state.resource,
            scope=self.settings.scope,
        )
        return PendingConsent(
            server=state, verifier=verifier, url_state=url_state, redirect_uri=redirect_uri, url=url,
            configured_client=bool(client_id),
        )  # fmt: skip

    async def finish_consent(
        self, pending: PendingConsent, *, code: str, client_secret: str | None = None
    ) -> CachedServer:
        """The second half: the code exchanged with the verifier and `resource`, the tokens kept in the
        token file. Returns what was kept."""
        kept = await self.exchange_consent(pending, code=code, client_secret=client_secret)
        async with self.store.locked(timeout_s=self.timeout_s):
            self.store.write(kept)
        return kept

    async def exchange_consent(
        self, pending: PendingConsent, *, code: str, client_secret: str | None = None
    ) -> CachedServer:
        """The code exchanged with the verifier and `resource`: what to keep, stamped `consented_at`; the
        caller keeps it (the token file, or the OE console's write of the Secret `mcp-oauth-NAME`)."""
        state = pending.server
        secret = client_secret if pending.configured_client else state.client_secret
        form = token_form(
            AUTHORIZATION_CODE, client_id=state.client_id or "", client_secret=secret,
            resource=state.resource, code=code, code_verifier=pending.verifier,
            redirect_uri=pending.redirect_uri,
        )  # fmt: skip
        async with self._client() as http:
            tokens = await self._token_request(http, state, form, previous=None)
        kept = state.model_copy(
            update={"tokens": tokens, "grant": AUTHORIZATION_CODE, "consented_at": self._clock()}
        )
        if pending.configured_client:  # a configured client's secret stays where it was configured
            kept = kept.model_copy(update={"client_secret": None})
        return kept

    # -- discovery and registration ---------------------------------------------------------------------

    async def _discover(self, http: httpx.AsyncClient, *, grant: str | None = None) -> CachedServer:
        """401 challenge -> protected resource metadata -> authorization server metadata."""
        announced = await self._challenge(http)
        found = None
        for url in _resource_metadata_urls(self.mcp_url, announced):
            payload = await self._get_json(http, url, what="the MCP server's protected resource metadata")
            if payload is not None:
                found = parse_protected_resource(payload, mcp_url=self.mcp_url)
                break
        if found is None:
            raise OAuthError(
                f"the MCP server of connector {self.server} publishes no protected resource metadata "
                "(RFC 9728), so its authorization server is unknown; it may not use OAuth (try a token)",
                category="server_error",
            )
        issuer = choose_issuer(found, pinned=self.settings.authorization_server)
        meta = await self._issuer_metadata(http, issuer, grant=grant or self.settings.grant)
        return _cached(meta, resource=found.resource, grant=grant or self.settings.grant)

    async def _issuer_metadata(self, http: httpx.AsyncClient, issuer: str, *, grant: str) -> ServerMetadata:
        for url in server_metadata_urls(issuer):
            payload = await self._get_json(http, url, what="the authorization server's metadata")
            if payload is not None:
                return parse_server_metadata(payload, issuer=issuer, mcp_url=self.mcp_url, grant=grant)
        raise OAuthError(
            "the authorization server publishes no metadata (RFC 8414 or OpenID Connect discovery)",
            category="server_error",
        )

    async def _challenge(self, http: httpx.AsyncClient) -> str | None:
        """The resource metadata URL a tokenless request's 401 names, if it names one."""
        try:
            response = await http.post(
                self.mcp_url,
                content=json.dumps(_PROBE).encode(),
                headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
            )
            await response.aclose()
        except httpx.HTTPError as exc:
            raise _unreachable("the MCP server", exc) from None
        if response.status_code != 401:
            return None
        return challenge_params(response.headers.get("www-authenticate", "")).get("resource_metadata")

    async def _register(
        self, http: httpx.AsyncClient, state: CachedServer, *, redirect_uri: str | None
    ) -> CachedServer:
        grant = AUTHORIZATION_CODE if redirect_uri else CLIENT_CREDENTIALS
        body = registration_body(grant=grant, redirect_uri=redirect_uri, scope=self.settings.scope)
        status, payload = await self._post(
            http, state.registration_endpoint or "", json_body=body, what="client registration"
        )
        if status not in (200, 201) or not isinstance(payload, dict) or not payload.get("client_id"):
            code = payload.get("error") if isinstance(payload, dict) else None
            said = str(code or f"HTTP {status}")[:40]
            raise OAuthError(
                f"the authorization server refused to register a client ({said}); "
                "put client_id (and client_secret) in the connector's credential Secret",
            )
        secret = payload.get("client_secret")
        return state.model_copy(
            update={
                "client_id": str(payload["client_id"]),
                "client_secret": secret if isinstance(secret, str) and secret else None,
                "registered": True,
            }
        )

    # -- the wire ---------------------------------------------------------------------------------------

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            timeout=self.timeout_s, follow_redirects=False, trust_env=False, verify=self._ssl or True
        )

    async def _token_request(
        self, http: httpx.AsyncClient, state: CachedServer, form: dict[str, str], *, previous: TokenSet | None
    ) -> TokenSet:
        status, payload = await self._post(http, state.token_endpoint, form=form, what="the token endpoint")
        if status != 200:
            raise token_error(status, payload, grant=form["grant_type"], server=self.server)
        return token_set(payload, now=self._clock(), previous=previous)

    def _check_host(self, url: str, *, what: str) -> None:
        if self._host_problem is not None and (problem := self._host_problem(urlsplit(url).hostname or "")):
            raise _refused_host(what, problem)
        if self._url_problem is not None and (problem := self._url_problem(url)):
            raise _refused_host(what, problem)

    async def _get_json(self, http: httpx.AsyncClient, url: str, *, what: str) -> Any:
        """The JSON at `url`, or None when it is not there (4xx): the caller tries the next place."""
        self._check_host(url, what=what)
        try:
            async with http.stream("GET", url, headers={"Accept": "application/json"}) as response:
                if 400 <= response.status_code < 500:
                    return None
                body = await _bounded_body(response)
                status = response.status_code
        except httpx.HTTPError as exc:
            raise _unreachable(what, exc) from None
        if status != 200:
            raise OAuthError(f"{what} answered HTTP {status}", category="server_error")
        try:
            return json.loads(body)
        except ValueError:
            raise OAuthError(f"{what} is not JSON", category="server_error") from None

    async def _post(
        self, http: httpx.AsyncClient, url: str, *, what: str, form: Mapping[str, str] | None = None,
        json_body: Any = None,
    ) -> tuple[int, Any]:  # fmt: skip
        self._check_host(url, what=what)
        headers = {"Accept": "application/json", "Cache-Control": "no-store"}
        try:
            async with http.stream("POST", url, data=form, json=json_body, headers=headers) as response:
                body = await _bounded_body(response)
                status = response.status_code
        except httpx.HTTPError as exc:
            raise _unreachable(what, exc) from None
        try:
            return status, json.loads(body) if body else None
        except ValueError:
            return status, None


def _cached(meta: ServerMetadata, *, resource: str, grant: str) -> CachedServer:
    return CachedServer(
        resource=resource,
        issuer=meta.issuer,
        token_endpoint=meta.token_endpoint,
        authorization_endpoint=meta.authorization_endpoint,
        registration_endpoint=meta.registration_endpoint,
        grant=grant,
    )


def _refused_host(what: str, problem: str) -> OAuthError:
    return OAuthError(
        f"{what} is at an address this process does not call ({problem})", category="client_error"
    )


def _resource_metadata_urls(mcp_url: str, announced: str | None) -> list[str]:
    if announced is not None and urlsplit(announced).scheme not in ("http", "https"):
        announced = None
    return protected_resource_urls(mcp_url, announced=announced)


async def _bounded_body(response: httpx.Response) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_METADATA_BYTES:
            raise OAuthError(f"an OAuth answer was over {MAX_METADATA_BYTES} bytes", category="server_error")
        parts.append(chunk)
    return b"".join(parts)


def _unreachable(what: str, exc: httpx.HTTPError) -> OAuthError:
    kind = "timeout" if isinstance(exc, httpx.TimeoutException) else "connection"
    return OAuthError(f"cannot reach {what} ({type(exc).__name__})", category=kind)


class _Callback:
    """The one-shot loopback redirect target: the first request carrying our `state` ends the wait."""

    def __init__(self) -> None:
        self.expected_state: str | None = None
        self.code: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            writer.close()
            return
        status, text = self._answer(head[:_MAX_CALLBACK_BYTES])
        body = text.encode()
        page = _PAGE.format(status=status, length=len(body), body=text)
        writer.write(page.encode())
        try:
            await writer.drain()
        finally:
            writer.close()

    def _answer(self, head: bytes) -> tuple[str, str]:
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        method, _, rest = line.partition(" ")
        target = rest.rpartition(" ")[0]
        parts = urlsplit(target)
        if method != "GET" or parts.path != _CALLBACK_PATH:
            return "404 Not Found", "not here"
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if self.expected_state is None or query.get("state") != self.expected_state:
            return "400 Bad Request", "this answer is not for the login in progress (state does not match)"
        if self.code.done():
            return "409 Conflict", "this login is already complete"
        if "error" in query:
            code = "".join(c for c in query["error"][:40] if c.isalnum() or c == "_")
            self.code.set_exception(OAuthError(f"the authorization server refused the consent ({code})"))
            return "400 Bad Request", "consent refused; you may close this window"
        if not query.get("code"):
            return "400 Bad Request", "no code in this answer"
        self.code.set_result(query["code"])
        return "200 OK", "Agent Engine: consent received; you may close this window"
