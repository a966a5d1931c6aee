"""`agentengine connectors login NAME`: a person's OAuth consent for an MCP connector, kept as a token file.

The consent page opens in a browser (or its URL is printed); the authorization server sends the browser
back to a one-shot listener on 127.0.0.1, and the code is exchanged with its PKCE verifier. What is kept
(`AGENTIC_MCP_OAUTH_DIR/NAME.json`, mode 0600) is what the Tool Pod needs to refresh on its own; the
command prints how to hand it to the cluster as the Secret the operator mounts.
"""

from __future__ import annotations

import asyncio
import os
import webbrowser

import click

from agent_runtime.cli.errors import ERROR, USAGE, CliError
from agent_runtime.connectors.mcp.oauth import AUTHORIZATION_CODE, OAuthError, OAuthSettings
from agent_runtime.connectors.mcp.oauth_flow import OAuthSession
from agent_runtime.connectors.mcp.oauth_store import SEED_SECRET_PREFIX, TokenStore


def run_login(
    name: str,
    *,
    url: str,
    scope: str | None,
    authorization_server: str | None,
    client_id: str | None,
    client_secret_env: str | None,
    port: int,
    open_browser: bool,
    wait_s: float,
) -> None:
    if not url.startswith(("https://", "http://")):
        raise CliError("--url must be the MCP server's http:// or https:// endpoint", exit_code=USAGE)
    client_secret = None
    if client_secret_env:
        client_secret = os.environ.get(client_secret_env)
        if not client_secret:
            raise CliError(f"--client-secret-env: {client_secret_env} is unset or empty", exit_code=USAGE)
    try:
        store = TokenStore(name)
        session = OAuthSession(
            server=name,
            mcp_url=url,
            settings=OAuthSettings(
                grant=AUTHORIZATION_CODE, scope=scope, authorization_server=authorization_server
            ),
            store=store,
        )
        asyncio.run(
            session.login(
                open_url=lambda consent: _show(consent, open_browser=open_browser),
                client_id=client_id,
                client_secret=client_secret,
                port=port,
                wait_s=wait_s,
            )
        )
    except OAuthError as exc:
        raise CliError(f"connector {name}: {exc.explanation}", exit_code=ERROR) from None
    click.echo(f"consent kept in {store.path} (mode 0600)", err=True)
    click.echo(
        "for the cluster: kubectl -n NAMESPACE create secret generic "
        f"{SEED_SECRET_PREFIX}{name} --from-file={name}.json={store.path}",
        err=True,
    )


def _show(consent: str, *, open_browser: bool) -> None:
    click.echo(f"open this URL to consent (waiting for the redirect to 127.0.0.1):\n{consent}", err=True)
    if open_browser:
        webbrowser.open(consent)
