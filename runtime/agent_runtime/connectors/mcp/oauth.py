"""OAuth 2.1 for MCP servers (the MCP authorization spec, B-23): the decisions, pure. I/O is `oauth_flow`.

An MCP server that wants a token answers 401 with `WWW-Authenticate: Bearer resource_metadata="..."`; its
protected resource metadata (RFC 9728) names its authorization servers; an authorization server's metadata
(RFC 8414, else OpenID Connect discovery) names its endpoints. The client registers itself (RFC 7591) when
the server offers registration and no client id is configured, then gets tokens by `client_credentials`
(an agent's own identity) or by an authorization code with PKCE S256 (a person's consent, once, through
`agentengine connectors login`), always naming the MCP server in `resource` (RFC 8707) so a token is bound
to that server and cannot be replayed at another.

What is checked, because a hostile MCP server could otherwise steer the client: the resource metadata must
name this server's URL, the authorization server's metadata must name the issuer it was fetched for, its
endpoints must be https (http only on loopback, or when the MCP server itself is plain http), and a pinned
`authorization_server` in the connector's config must be the one the server names.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from typing import Any, Literal
from urllib.parse import urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

OAUTH = "oauth"
CLIENT_CREDENTIALS = "client_credentials"
AUTHORIZATION_CODE = "authorization_code"
# Where the token files are (L-07), and the seed the operator mounts: the Secret `mcp-oauth-<connector>`
# (key `<connector>.json`, what `agentengine connectors login` wrote), in the Tool Pod only.
DIR_ENV = "AGENTIC_MCP_OAUTH_DIR"
SEED_ENV = "AGENTIC_MCP_OAUTH_SEED_DIR"
SEED_SECRET_PREFIX = "mcp-oauth-"  # noqa: S105 (a name prefix, not a secret)
# The label the operator puts on the Secret it pre-creates for a console consent (and the OE keeps).
SEED_SECRET_LABEL = "agentengine.io/mcp-oauth-connector"  # noqa: S105 (a label name)
REFRESH_SKEW_S = 60.0  # refresh this long before the access token expires
MAX_METADATA_BYTES = 256 * 1024
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_AUTH_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')
_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

# The connector config's `auth` (the `mcp` type's CONFIG_SCHEMA embeds it).
AUTH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type"],
    "additionalProperties": False,
    "properties": {
        "type": {"enum": [OAUTH], "description": "oauth: the MCP authorization spec (OAuth 2.1)"},
        "grant": {
            "enum": [CLIENT_CREDENTIALS, AUTHORIZATION_CODE],
            "default": CLIENT_CREDENTIALS,
            "description": "client_credentials: the agent's own client; authorization_code: a person's "
            "consent given once with `agentengine connectors login NAME`, kept as a refresh token",
        },
        "scope": {"type": "string", "maxLength": 1000, "description": "scopes to ask for, space-separated"},
        "authorization_server": {
            "type": "string",
            "pattern": r"^https?://[^\s/?#]+[^\s?#]*$",
            "maxLength": 2048,
            "description": "the issuer the server must name: a pin, needed with a client_secret; the Tool "
            "Pod's egress too",
        },
    },
}
OAUTH_CREDENTIALS = {
    "client_id": "the OAuth client id (optional: without it the client registers itself, RFC 7591)",
    "client_secret": "the OAuth client's secret (optional: a public client sends none)",
}


class OAuthError(Exception):
    """An OAuth step failed; `explanation` names the step and the fix, never a token or a secret."""

    def __init__(self, explanation: str, *, category: str = "auth") -> None:
        super().__init__(explanation)
        self.explanation = explanation
        self.category = category


class OAuthSettings(BaseModel):
    """The connector config's `auth` block."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["oauth"] = OAUTH
    grant: Literal["client_credentials", "authorization_code"] = CLIENT_CREDENTIALS
    scope: str | None = None
    authorization_server: str | None = None


class ProtectedResource(BaseModel):
    """RFC 9728 protected resource metadata (what we use of it)."""

    model_config = ConfigDict(extra="ignore")

    resource: str
    authorization_servers: list[str] = Field(min_length=1)
    scopes_supported: list[str] | None = None


class ServerMetadata(BaseModel):
    """RFC 8414 authorization server metadata (what we use of it)."""

    model_config = ConfigDict(extra="ignore")

    issuer: str
    token_endpoint: str
    authorization_endpoint: str | None = None
    registration_endpoint: str | None = None
    revocation_endpoint: str | None = None
    grant_types_supported: list[str] | None = None
    code_challenge_methods_supported: list[str] | None = None
    token_endpoint_auth_methods_supported: list[str] | None = None


class TokenSet(BaseModel):
    """Tokens as kept: the access token with its absolute expiry, and the refresh token if one came."""

    model_config = ConfigDict(extra="ignore")

    access_token: str
    token_type: str = "Bearer"  # noqa: S105 (a token type, not a secret)
    expires_at: float | None = None
    refresh_token: str | None = None
    scope: str | None = None


class CachedServer(BaseModel):
    """`<server>.json`: what discovery found, the client we are, and the tokens."""

    model_config = ConfigDict(extra="ignore")

    version: int = 1
    resource: str
    issuer: str
    token_endpoint: str
    authorization_endpoint: str | None = None
    registration_endpoint: str | None = None
    client_id: str | None = None
    client_secret: str | None = (
        None  # only a registered (RFC 7591) client's: a configured one stays in its Secret
    )
    registered: bool = False
    grant: str = CLIENT_CREDENTIALS
    tokens: TokenSet | None = None
    # When a person's consent produced these tokens (epoch seconds): a newer consent in the mounted seed
    # replaces what a Tool Pod keeps (oauth_store.TokenStore.read), an older or equal one does not.
    consented_at: float | None = None


def check_server_name(name: str) -> str:
    """The token file's stem: the connector's name, nothing that could leave the directory."""
    if not _SERVER_NAME.match(name) or name in (".", ".."):
        raise OAuthError(
            f"connector name {name[:60]!r} cannot name an OAuth token file: use letters, digits, . _ -",
            category="client_error",
        )
    return name


def challenge_params(header: str) -> dict[str, str]:
    """The auth-params of a `Bearer` challenge in WWW-Authenticate (RFC 6750/9728), names lowercased."""
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return {}
    return {
        m.group(1).lower(): (m.group(2).replace('\\"', '"') if m.group(2) is not None else m.group(3))
        for m in _AUTH_PARAM.finditer(rest)
    }


def canonical_resource(url: str) -> str:
    """The MCP server's URL as its resource indicator: scheme and host lowercased, no fragment, no query."""
    parts = urlsplit(url)
    path = parts.path if parts.path != "/" else ""
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, "", ""))


def protected_resource_urls(mcp_url: str, *, announced: str | None) -> list[str]:
    """Where the resource metadata may be: the URL the 401 named, else the RFC 9728 well-known URIs (the
    path-inserted one first, then the root)."""
    parts = urlsplit(mcp_url)
    base = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource"
    path = parts.path.rstrip("/")
    candidates = [announced] if announced else []
    candidates += [base + path] if path else []
    candidates.append(base)
    return list(dict.fromkeys(candidates))


def server_metadata_urls(issuer: str) -> list[str]:
    """RFC 8414's well-known URI for `issuer`, then OpenID Connect discovery's two spellings."""
    parts = urlsplit(issuer)
    root = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    return list(
        dict.fromkeys(
            [
                f"{root}/.well-known/oauth-authorization-server{path}",
                f"{root}/.well-known/openid-configuration{path}",
                f"{root}{path}/.well-known/openid-configuration",
            ]
        )
    )


def same_url(a: str, b: str) -> bool:
    """Equal as identifiers: case of scheme and host, and one trailing slash, aside."""
    return canonical_resource(a).rstrip("/") == canonical_resource(b).rstrip("/")


def parse_protected_resource(payload: Any, *, mcp_url: str) -> ProtectedResource:
    try:
        found = ProtectedResource.model_validate(payload)
    except ValidationError:
        raise OAuthError(
            "the MCP server's protected resource metadata is not valid RFC 9728 metadata (it needs "
            "resource and authorization_servers)",
            category="server_error",
        ) from None
    if not same_url(found.resource, mcp_url):
        raise OAuthError(
            "the MCP server's protected resource metadata names another resource than the connector's url; "
            "set url to the server's own endpoint",
            category="server_error",
        )
    return found


def check_secret_pinned(settings: OAuthSettings, client_secret: str | None) -> None:
    """A configured client secret goes only to a pinned authorization server: unpinned, whichever issuer the
    MCP server's metadata names would receive it, and a hostile server could name its own."""
    if client_secret and settings.authorization_server is None:
        raise OAuthError(
            "a client_secret is configured but auth.authorization_server is not: set it to the issuer the "
            "client was registered with, so the secret is sent to no other",
            category="client_error",
        )


def choose_issuer(found: ProtectedResource, *, pinned: str | None) -> str:
    """The authorization server to use: the pinned one when the server lists it, else the first listed."""
    if pinned is None:
        return found.authorization_servers[0]
    for issuer in found.authorization_servers:
        if same_url(issuer, pinned):
            return issuer
    raise OAuthError(
        "the MCP server names an authorization server other than auth.authorization_server; check the "
        "connector's config (the pin stops a server from sending the client's secret elsewhere)",
        category="client_error",
    )


def parse_server_metadata(payload: Any, *, issuer: str, mcp_url: str, grant: str) -> ServerMetadata:
    try:
        meta = ServerMetadata.model_validate(payload)
    except ValidationError:
        raise OAuthError(
            "the authorization server's metadata is not valid RFC 8414 metadata (it needs issuer and "
            "token_endpoint)",
            category="server_error",
        ) from None
    if not same_url(meta.issuer, issuer):
        raise OAuthError(
            "the authorization server's metadata names another issuer than the one it was fetched for",
            category="server_error",
        )
    for name in ("token_endpoint", "authorization_endpoint", "registration_endpoint"):
        value = getattr(meta, name)
        if value is not None:
            check_endpoint(value, mcp_url=mcp_url, what=name)
    if grant == AUTHORIZATION_CODE:
        if meta.authorization_endpoint is None:
            raise OAuthError(
                "the authorization server has no authorization_endpoint, so auth.grant "
                "authorization_code cannot work; use client_credentials",
                category="client_error",
            )
        methods = meta.code_challenge_methods_supported
        if methods is not None and "S256" not in methods:
            raise OAuthError(
                "the authorization server does not offer PKCE S256, which OAuth 2.1 requires",
                category="server_error",
            )
    supported = meta.grant_types_supported
    if supported is not None and grant not in supported:
        raise OAuthError(
            f"the authorization server does not offer the {grant} grant (it offers "
            f"{', '.join(supported[:10])}); set auth.grant to one it offers",
            category="client_error",
        )
    return meta


def check_endpoint(url: str, *, mcp_url: str, what: str) -> str:
    """https, or http only on loopback or beside a plain-http MCP server (a token must not cross the open
    network in clear because metadata said so)."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if (
        parts.scheme == "http"
        and parts.hostname
        and (parts.hostname in _LOOPBACK or urlsplit(mcp_url).scheme == "http")
    ):
        return url
    raise OAuthError(
        f"the authorization server's {what} is not an https URL; the client sends no credential there",
        category="server_error",
    )


def same_origin(url: str, issuer: str) -> bool:
    """`url` is on the issuer's scheme, host and port: the only place a console consent's requests go."""
    a, b = urlsplit(url), urlsplit(issuer)
    return (a.scheme, (a.hostname or "").lower(), a.port) == (b.scheme, (b.hostname or "").lower(), b.port)


def pkce_pair() -> tuple[str, str]:
    """(code_verifier, S256 code_challenge), RFC 7636."""
    verifier = secrets.token_urlsafe(48)
    return verifier, s256(verifier)


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


def authorization_url(
    endpoint: str, *, client_id: str, redirect_uri: str, challenge: str, state: str, resource: str,
    scope: str | None,
) -> str:  # fmt: skip
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": state,
        "resource": resource,
        **({"scope": scope} if scope else {}),
    }
    joiner = "&" if urlsplit(endpoint).query else "?"
    return endpoint + joiner + urlencode(query)


def registration_body(*, grant: str, redirect_uri: str | None, scope: str | None) -> dict[str, Any]:
    """RFC 7591 client metadata: a confidential client for client_credentials, a public native one for a
    person's login through a loopback redirect."""
    if grant == CLIENT_CREDENTIALS:
        body: dict[str, Any] = {
            "client_name": "Agent Engine",
            "grant_types": [CLIENT_CREDENTIALS],
            "token_endpoint_auth_method": "client_secret_post",
            "redirect_uris": ["http://127.0.0.1/unused"],  # some servers insist on one
            "response_types": [],
        }
    else:
        body = {
            "client_name": "Agent Engine CLI",
            "grant_types": [AUTHORIZATION_CODE, "refresh_token"],
            "token_endpoint_auth_method": "none",
            "redirect_uris": [redirect_uri],
            "response_types": ["code"],
            "application_type": "native",
        }
    if scope:
        body["scope"] = scope
    return body


def token_form(
    grant: str, *, client_id: str, client_secret: str | None, resource: str, scope: str | None = None,
    code: str | None = None, code_verifier: str | None = None, redirect_uri: str | None = None,
    refresh_token: str | None = None,
) -> dict[str, str]:  # fmt: skip
    """The token request's form (client_secret_post), always with `resource` (RFC 8707)."""
    form = {"grant_type": grant, "client_id": client_id, "resource": resource}
    if client_secret:
        form["client_secret"] = client_secret
    if grant == AUTHORIZATION_CODE:
        form.update(code=code or "", code_verifier=code_verifier or "", redirect_uri=redirect_uri or "")
    elif grant == "refresh_token":
        form["refresh_token"] = refresh_token or ""
    elif scope:
        form["scope"] = scope
    return form


def token_set(payload: Any, *, now: float, previous: TokenSet | None = None) -> TokenSet:
    """A token endpoint's answer as kept; a refresh answer without a new refresh token keeps the old one."""
    if not isinstance(payload, dict) or not isinstance(payload.get("access_token"), str):
        raise OAuthError(
            "the authorization server's token answer holds no access_token", category="server_error"
        )
    kind = str(payload.get("token_type") or "Bearer")
    if kind.lower() != "bearer":
        raise OAuthError(
            f"the authorization server issued a {kind[:20]!r} token; only Bearer tokens are sent",
            category="server_error",
        )
    expires_in = payload.get("expires_in")
    expires_at = now + float(expires_in) if isinstance(expires_in, int | float) and expires_in > 0 else None
    refresh = payload.get("refresh_token")
    return TokenSet(
        access_token=payload["access_token"],
        expires_at=expires_at,
        refresh_token=refresh
        if isinstance(refresh, str) and refresh
        else (previous.refresh_token if previous else None),
        scope=payload.get("scope") if isinstance(payload.get("scope"), str) else None,
    )


def usable_token(tokens: TokenSet | None, *, now: float, rejected: str | None = None) -> str | None:
    """The access token if it is not the one just refused and not within REFRESH_SKEW_S of its expiry."""
    if tokens is None or (rejected is not None and tokens.access_token == rejected):
        return None
    if tokens.expires_at is not None and tokens.expires_at - REFRESH_SKEW_S <= now:
        return None
    return tokens.access_token


def token_error(status: int, payload: Any, *, grant: str, server: str = "NAME") -> OAuthError:
    """A token endpoint's refusal (RFC 6749 §5.2) as our error: the server's code, never its echo."""
    code = payload.get("error") if isinstance(payload, dict) else None
    code = code if isinstance(code, str) and re.fullmatch(r"[a-z_]{1,40}", code) else f"HTTP {status}"
    if code == "invalid_grant" and grant in ("refresh_token", AUTHORIZATION_CODE):
        return OAuthError(
            "the authorization server refused the refresh token (invalid_grant: revoked or expired); a "
            f"person must consent again with `agentengine connectors login {server}`",
        )
    if code in ("invalid_client", "unauthorized_client"):
        return OAuthError(
            f"the authorization server refused the client ({code}); check the client_id and client_secret "
            "in the connector's credential Secret",
        )
    return OAuthError(f"the authorization server refused the {grant} token request ({code})")
