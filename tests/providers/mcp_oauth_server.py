"""An MCP server behind OAuth 2.1 and its authorization server, for the MCP OAuth tests (official `mcp` SDK).

Runs in the SDK's own venv (`tests/providers/mcp_oauth_peer.py` starts it). Two listeners in one process:

- the authorization server on `--as-port`: the SDK's own routes (`create_auth_routes`: RFC 8414 metadata,
  /authorize with S256 PKCE, /token for authorization_code and refresh_token, RFC 7591 /register, /revoke)
  over an in-memory provider, plus the `client_credentials` grant the SDK's token handler lacks (answered
  here before it), and one pre-registered confidential client (`--client-id`, `--client-secret`).
  Consent is automatic: /authorize redirects straight back to the client's loopback redirect with a code.
  Refresh tokens rotate (a used one is dead), so two clients refreshing with the same one cannot both win.
- the MCP server on `--port`: the same tools as `mcp_server.py`, behind the SDK's bearer middleware with
  RFC 9728 protected resource metadata and `validate_token_resource` (a token not issued for this server's
  URL through the `resource` parameter is refused).

Control routes on the authorization server: `GET /control/stats` (tokens issued per grant, refused
refreshes), `POST /control/revoke` (every access token dead; with `{"refresh": true}` the refresh tokens
too), `POST /control/ttl {"seconds": N}` (lifetime of access tokens issued from now on).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import time
from collections import Counter
from typing import Any

import uvicorn
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import ClientAuthenticator
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    ProviderTokenVerifier,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.routes import build_metadata, create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp_server import build
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

STATS: dict[str, Any] = {"issued": Counter(), "refused_refresh": 0, "resources": []}
SCOPE = "tools"


class Provider:
    """Clients, codes and tokens in memory."""

    def __init__(self, *, ttl: int) -> None:
        self.ttl = ttl
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        STATS["issued"]["registration"] += 1
        self.clients[str(client_info.client_id)] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=str(client.client_id),
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject="ada",
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def issue(self, *, client_id: str, scopes: list[str], resource: str | None, grant: str,
              refresh: bool, subject: str | None) -> OAuthToken:  # fmt: skip
        STATS["issued"][grant] += 1
        STATS["resources"].append(resource)
        access = "at-" + secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=int(time.time()) + self.ttl,
            resource=resource, subject=subject,
        )  # fmt: skip
        refresh_token = None
        if refresh:
            refresh_token = "rt-" + secrets.token_urlsafe(24)
            self.refresh[refresh_token] = RefreshToken(
                token=refresh_token, client_id=client_id, scopes=scopes, resource=resource, subject=subject
            )
        return OAuthToken(
            access_token=access, expires_in=self.ttl, scope=" ".join(scopes), refresh_token=refresh_token
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self.issue(client_id=str(client.client_id), scopes=authorization_code.scopes,
                          resource=authorization_code.resource, grant="authorization_code", refresh=True,
                          subject=authorization_code.subject)  # fmt: skip

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> Any:
        found = self.refresh.get(refresh_token)
        if found is None:
            STATS["refused_refresh"] += 1
        return found

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)  # rotation: the used one is dead
        await asyncio.sleep(0.5)  # a slow authorization server widens the window two refreshers could race in
        return self.issue(client_id=str(client.client_id), scopes=scopes, resource=refresh_token.resource,
                          grant="refresh_token", refresh=True, subject=refresh_token.subject)  # fmt: skip

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: Any) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


def authorization_server(provider: Provider, *, issuer: str, dcr: bool) -> Starlette:
    options = ClientRegistrationOptions(enabled=dcr, valid_scopes=[SCOPE], default_scopes=[SCOPE])
    revocation = RevocationOptions(enabled=True)
    sdk_routes = create_auth_routes(
        provider, AnyHttpUrl(issuer), client_registration_options=options, revocation_options=revocation
    )
    sdk_token = TokenHandler(provider, ClientAuthenticator(provider))  # type: ignore[arg-type]
    metadata = build_metadata(AnyHttpUrl(issuer), None, options, revocation)
    metadata.grant_types_supported = [*(metadata.grant_types_supported or []), "client_credentials"]

    async def well_known(request: Request) -> JSONResponse:
        return JSONResponse(metadata.model_dump(mode="json", exclude_none=True))

    async def token(request: Request) -> Any:
        form = await request.form()
        if form.get("grant_type") != "client_credentials":
            return await sdk_token.handle(request)  # the same Request: its form is read once, cached
        client = provider.clients.get(str(form.get("client_id") or ""))
        if client is None or not client.client_secret or form.get("client_secret") != client.client_secret:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if "client_credentials" not in client.grant_types:
            return JSONResponse({"error": "unauthorized_client"}, status_code=400)
        resource = form.get("resource")
        issued = provider.issue(client_id=str(client.client_id), scopes=[SCOPE],
                                resource=str(resource) if resource else None, grant="client_credentials",
                                refresh=False, subject=None)  # fmt: skip
        return JSONResponse(issued.model_dump(exclude_none=True), headers={"Cache-Control": "no-store"})

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(
            {"issued": dict(STATS["issued"]), "refused_refresh": STATS["refused_refresh"],
             "resources": STATS["resources"], "live_access": len(provider.access)}
        )  # fmt: skip

    async def revoke(request: Request) -> JSONResponse:
        body = await request.json() if await request.body() else {}
        provider.access.clear()
        if body.get("refresh"):
            provider.refresh.clear()
        return JSONResponse({"revoked": True})

    async def ttl(request: Request) -> JSONResponse:
        provider.ttl = int((await request.json())["seconds"])
        return JSONResponse({"ttl": provider.ttl})

    routes = [
        Route("/.well-known/oauth-authorization-server", well_known, methods=["GET"]),
        Route("/token", token, methods=["POST"]),
        *[r for r in sdk_routes if r.path not in ("/token", "/.well-known/oauth-authorization-server")],
        Route("/control/stats", stats, methods=["GET"]),
        Route("/control/revoke", revoke, methods=["POST"]),
        Route("/control/ttl", ttl, methods=["POST"]),
    ]
    return Starlette(routes=routes)


async def serve(args: argparse.Namespace) -> None:
    provider = Provider(ttl=args.ttl)
    provider.clients[args.client_id] = OAuthClientInformationFull(
        client_id=args.client_id,
        client_secret=args.client_secret,
        redirect_uris=None,
        grant_types=["client_credentials", "authorization_code", "refresh_token"],
        token_endpoint_auth_method="client_secret_post",
        scope=SCOPE,
    )
    issuer = f"http://127.0.0.1:{args.as_port}"
    resource = f"http://127.0.0.1:{args.port}/mcp"
    auth_app = authorization_server(provider, issuer=issuer, dcr=not args.no_dcr)
    mcp_app = build(page_size=50, fillers=0).streamable_http_app(
        streamable_http_path="/mcp",
        json_response=True,
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(issuer),
            resource_server_url=AnyHttpUrl(resource),
            required_scopes=[SCOPE],
            validate_token_resource=True,
        ),
        token_verifier=ProviderTokenVerifier(provider),  # type: ignore[arg-type]
    )
    servers = [
        uvicorn.Server(uvicorn.Config(auth_app, host="127.0.0.1", port=args.as_port, log_level="warning")),
        uvicorn.Server(uvicorn.Config(mcp_app, host="127.0.0.1", port=args.port, log_level="warning")),
    ]
    await asyncio.gather(*(s.serve() for s in servers))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--as-port", type=int, required=True)
    parser.add_argument("--client-id", default="agent-client")
    parser.add_argument("--client-secret", required=True)
    parser.add_argument("--ttl", type=int, default=3600)
    parser.add_argument("--no-dcr", action="store_true")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
