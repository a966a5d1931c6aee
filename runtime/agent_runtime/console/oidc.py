"""Console sign-in with OIDC: the authorization code flow with PKCE (S256) against the issuer the cluster's
API server trusts.

The console is a public client (no client secret): `/console/oidc/start` makes a one-time login (state,
nonce and code verifier, kept server-side for 10 minutes) and sends the browser to the issuer's
authorization endpoint with the verifier's S256 challenge; `/console/oidc/callback` takes the code back,
checks the state against the browser's one-time cookie, redeems the code with the verifier at the token
endpoint and checks the ID token's nonce. The ID token is then the session's bearer token: the OE
authenticates it with a TokenReview like any client's (the API server verifies its signature, issuer and
audience), so OIDC adds no trust of its own.

Settings: `OE_CONSOLE_OIDC_ISSUER` (an https issuer URL, exactly its tokens' `iss`; it must be one of
`OE_CLIENT_AUTH_OIDC_ISSUERS`), `OE_CONSOLE_OIDC_CLIENT_ID` (the client the issuer knows the console as;
its redirect URI is `<console origin>/console/oidc/callback`), `OE_CONSOLE_OIDC_SCOPES` (default
`openid`), `OE_CONSOLE_OIDC_CA_FILE` (a CA bundle for the issuer, if not a public one).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp

ISSUER_ENV = "OE_CONSOLE_OIDC_ISSUER"
CLIENT_ID_ENV = "OE_CONSOLE_OIDC_CLIENT_ID"
SCOPES_ENV = "OE_CONSOLE_OIDC_SCOPES"
CA_FILE_ENV = "OE_CONSOLE_OIDC_CA_FILE"
LOGIN_TTL_S = 600.0
MAX_PENDING = 1024


class OIDCError(Exception):
    """A sign-in that cannot go on; the message names what went wrong (never a code or a token)."""


@dataclass(frozen=True)
class OIDCSettings:
    issuer: str
    client_id: str
    scopes: str = "openid"
    ca_file: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OIDCSettings | None:
        """None when no issuer is set; a ValueError names the setting and the fix."""
        issuer = env.get(ISSUER_ENV, "").strip()
        if not issuer:
            return None
        if urlsplit(issuer).scheme != "https":
            raise ValueError(
                f"{ISSUER_ENV} must be the issuer's https URL (its tokens' iss), got {issuer[:80]!r}"
            )
        client_id = env.get(CLIENT_ID_ENV, "").strip()
        if not client_id:
            raise ValueError(
                f"{ISSUER_ENV} needs {CLIENT_ID_ENV}: the client id the issuer knows the console as"
            )
        scopes = env.get(SCOPES_ENV, "").strip() or "openid"
        if "openid" not in scopes.split():
            scopes = f"openid {scopes}"
        return cls(
            issuer=issuer.rstrip("/"),
            client_id=client_id,
            scopes=scopes,
            ca_file=env.get(CA_FILE_ENV, "").strip() or None,
        )


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def code_challenge(verifier: str) -> str:
    """RFC 7636 S256: base64url(sha256(verifier)), unpadded."""
    return _b64url(hashlib.sha256(verifier.encode("ascii")).digest())


@dataclass(frozen=True)
class PendingLogin:
    state: str
    nonce: str
    verifier: str
    redirect_uri: str
    expires_at: float


class PendingLogins:
    """One-time logins by state, for `LOGIN_TTL_S`; taking one removes it."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._pending: OrderedDict[str, PendingLogin] = OrderedDict()

    def start(self, *, redirect_uri: str) -> PendingLogin:
        login = PendingLogin(
            state=secrets.token_urlsafe(24),
            nonce=secrets.token_urlsafe(24),
            verifier=secrets.token_urlsafe(48),  # 64 characters: RFC 7636 asks 43 to 128
            redirect_uri=redirect_uri,
            expires_at=self._clock() + LOGIN_TTL_S,
        )
        self._pending[login.state] = login
        while len(self._pending) > MAX_PENDING:
            self._pending.popitem(last=False)
        return login

    def take(self, state: str) -> PendingLogin | None:
        login = self._pending.pop(state, None)
        if login is None or self._clock() >= login.expires_at:
            return None
        return login


def authorization_url(endpoint: str, settings: OIDCSettings, login: PendingLogin) -> str:
    query = urlencode(
        {
            "response_type": "code",
            "client_id": settings.client_id,
            "redirect_uri": login.redirect_uri,
            "scope": settings.scopes,
            "state": login.state,
            "nonce": login.nonce,
            "code_challenge": code_challenge(login.verifier),
            "code_challenge_method": "S256",
        }
    )
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"


def unverified_claims(token: str) -> dict[str, Any] | None:
    """The JWT's claims, unverified (the TokenReview verifies them; here only the nonce is compared)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    return claims if isinstance(claims, dict) else None


class OIDCClient:
    """The issuer's discovery document (read once) and the code redemption."""

    def __init__(self, settings: OIDCSettings, *, timeout_s: float = 10.0) -> None:
        self.settings = settings
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._discovery: dict[str, Any] | None = None

    def _ssl(self) -> ssl.SSLContext | bool:
        if self.settings.ca_file:
            return ssl.create_default_context(cafile=self.settings.ca_file)
        return True

    async def _request(self, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        try:
            async with (
                aiohttp.ClientSession(timeout=self._timeout, trust_env=False) as session,
                session.request(method, url, ssl=self._ssl(), **kwargs) as response,
            ):
                body = await response.json(content_type=None)
                if response.status != 200 or not isinstance(body, dict):
                    error = body.get("error") if isinstance(body, dict) else None
                    raise OIDCError(
                        f"the issuer answered HTTP {response.status}" + (f" ({error})" if error else "")
                    )
                return body
        except (aiohttp.ClientError, TimeoutError, ValueError, OSError) as exc:
            raise OIDCError(
                f"the issuer {self.settings.issuer} did not answer ({type(exc).__name__})"
            ) from None

    async def endpoints(self) -> tuple[str, str]:
        if self._discovery is None:
            document = await self._request("GET", self.settings.issuer + "/.well-known/openid-configuration")
            if document.get("issuer", "").rstrip("/") != self.settings.issuer:
                raise OIDCError("the issuer's discovery document names another issuer")
            self._discovery = document
        authorize, token = (
            self._discovery.get("authorization_endpoint"),
            self._discovery.get("token_endpoint"),
        )
        if not isinstance(authorize, str) or not isinstance(token, str):
            raise OIDCError("the issuer's discovery document has no authorization_endpoint or token_endpoint")
        return authorize, token

    async def redeem(self, code: str, login: PendingLogin) -> str:
        """The ID token for `code`, its nonce checked."""
        _, token_endpoint = await self.endpoints()
        answer = await self._request(
            "POST",
            token_endpoint,
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": login.redirect_uri,
                "client_id": self.settings.client_id,
                "code_verifier": login.verifier,
            },
        )
        id_token = answer.get("id_token")
        if not isinstance(id_token, str):
            raise OIDCError("the issuer's token answer has no id_token")
        claims = unverified_claims(id_token)
        if claims is None or claims.get("nonce") != login.nonce:
            raise OIDCError("the ID token's nonce is not this sign-in's")
        return id_token
