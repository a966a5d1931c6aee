"""The credential an MCP call carries: the static `token` credential, or OAuth 2.1 (`auth: {type: oauth}`).

With OAuth, a call gets its access token from `OAuthSession` (the token file under
`AGENTIC_MCP_OAUTH_DIR`), and a 401 from the server is answered once: a fresh token (unless another
process already replaced the refused one), the call sent again (the server refused it before running it).
The client id and secret, when configured, are the connector's `client_id` and `client_secret` credentials.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from agent_runtime.connectors.framework import BuiltinToolError
from agent_runtime.connectors.mcp.oauth import OAuthError, OAuthSettings
from agent_runtime.connectors.mcp.oauth_flow import OAuthSession
from agent_runtime.connectors.mcp.oauth_store import TokenStore
from agent_runtime.redaction import redactor_for

T = TypeVar("T")


class _Secrets(Protocol):
    credentials: Mapping[str, str]

    def secret(self, field: str, env: Mapping[str, str], *, required: bool = True) -> str | None: ...


def oauth_egress(config: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The pinned authorization server's host and port: the Tool Pod must reach it too."""
    auth = config.get("auth")
    issuer = auth.get("authorization_server") if isinstance(auth, Mapping) else None
    if not isinstance(issuer, str):
        return []
    parts = urlsplit(issuer)
    return [(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))]


class McpAuthorization:
    """One connector's way to authorize its calls."""

    def __init__(
        self,
        *,
        name: str,
        config: Mapping[str, Any],
        ssl_context: ssl.SSLContext | None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        auth = config.get("auth")
        self.oauth: OAuthSession | None = None
        if isinstance(auth, Mapping):
            self.oauth = OAuthSession(
                server=name,
                mcp_url=str(config["url"]),
                settings=OAuthSettings.model_validate(dict(auth)),
                store=TokenStore(name, env=env),
                ssl_context=ssl_context,
                timeout_s=float(config.get("timeout_s") or 30),
            )

    async def call(
        self, connector: _Secrets, env: Mapping[str, str], send: Callable[[str | None], Awaitable[T]]
    ) -> T:
        """`send(token)` with this connector's credential; with OAuth, once more after a 401."""
        if self.oauth is None:
            return await send(connector.secret("token", env, required="token" in connector.credentials))
        client_id = connector.secret("client_id", env, required=False)
        client_secret = connector.secret("client_secret", env, required=False)
        token = await self._token(client_id, client_secret, rejected=None)
        refused = False
        try:
            return await send(token)
        except BuiltinToolError as exc:
            if exc.status_code != 401:
                raise
            refused = True
        if refused:
            token = await self._token(client_id, client_secret, rejected=token)
        return await send(token)

    async def _token(self, client_id: str | None, client_secret: str | None, *, rejected: str | None) -> str:
        assert self.oauth is not None
        try:
            return await self.oauth.token(client_id=client_id, client_secret=client_secret, rejected=rejected)
        except OAuthError as exc:
            scrub = redactor_for([v for v in (client_secret, rejected) if v]).text
            explanation = scrub(f"OAuth for connector {self.oauth.server}: {exc.explanation}")
            category = exc.category
        # Raised outside the handler: nothing chains back to frames that hold a secret.
        raise BuiltinToolError(category, explanation)
