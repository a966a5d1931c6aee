"""`agent.yaml` `mcp.servers` as connectors of the bundle (Decision 18, S1's route to MCP).

Each server becomes an `mcp` connector named `mcp-<server>`, its tools discovered when the bundle is built
(`python -m agent_runtime.connectors bundle`, or a runtime that builds its bundle from agent.yaml) by the
same client and the same materialization the operator uses for a Connector of type `mcp`. URLs are
interpolated from the tenant's own variables only (`contract.tenant_env_vars`); `auth.token_env` names the
token's variable, never a platform one. A process that lacks the token (the AER never receives connector
credentials) cannot discover: build the bundle ahead and mount it, as the operator does.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from agent_runtime.agent_config import AgentConfigError, McpAuth, McpServer, load_runtime_agent_config
from agent_runtime.connectors.framework import BuiltinConnectorDefs, BuiltinToolError, ConnectorConfigError
from agent_runtime.connectors.mcp.catalog import materialize_mcp, server_id_for_name, usable
from agent_runtime.connectors.mcp.client import McpClient, ServerTools
from agent_runtime.connectors.mcp.oauth import OAuthError, OAuthSettings
from agent_runtime.connectors.mcp.oauth_flow import OAuthSession
from agent_runtime.connectors.mcp.oauth_store import TokenStore
from agent_runtime.connectors.naming import check_connector_name
from agent_runtime.connectors.transport import tls_context
from agent_runtime.contract import llm_credential_names, tenant_env_vars

T = TypeVar("T")
CONNECTOR_PREFIX = "mcp-"


def connector_name(server: str) -> str:
    """`mcp-<server>`, in the connector name rules (a letter first, at most 40 characters)."""
    return f"{CONNECTOR_PREFIX}{server}"


def mcp_server_connectors(agent_config: str | Path, *, env: Mapping[str, str]) -> list[BuiltinConnectorDefs]:
    """Every `mcp.servers` entry of agent.yaml, discovered and materialized (sorted by name).

    Raises AgentConfigError naming the path (`mcp.servers.NAME.url`) and the fix; never a URL or token."""
    config_file = Path(agent_config)
    parsed = load_runtime_agent_config(
        config_file, env_vars=tenant_env_vars(env), llm_credential_names=llm_credential_names(env)
    )
    return [
        _server_connector(name, server, env=env, where=f"{config_file.name}: mcp.servers.{name}")
        for name, server in sorted(parsed.mcp.servers.items())
    ]


def _server_connector(
    name: str, server: McpServer, *, env: Mapping[str, str], where: str
) -> BuiltinConnectorDefs:
    connector = connector_name(name)
    try:
        check_connector_name(connector)
    except ValueError:
        raise AgentConfigError(
            f"{where}: the server name makes the connector name {connector[:60]!r}, over 40 characters or "
            "not starting with a letter; use a shorter server name"
        ) from None
    oauth = server.auth.oauth_config() if server.auth is not None else None
    if oauth is not None and server.auth is not None:
        return _oauth_server_connector(name, connector, server, server.auth, oauth, env=env, where=where)
    token_env = server.auth.token_env if server.auth is not None else None
    token = env.get(token_env, "") if token_env else ""
    if token_env and not token:
        raise AgentConfigError(
            f"{where}.auth.token_env: {token_env} is not set in this process, so the server cannot be "
            "asked for its tools; set it, or (for the AER, which never receives connector credentials) "
            "build the bundle ahead with `python -m agent_runtime.connectors bundle agent.yaml -o DIR` "
            "and set AGENTIC_CONNECTOR_BUNDLE_PATH"
        )
    client = McpClient(server.url, ssl_context=tls_context(None, env={}, connector=connector))
    try:
        found = run_sync(_discover(client, token or None))
    except BuiltinToolError as exc:
        raise AgentConfigError(
            f"{where}: discovering the server's tools failed ({exc.category}: {exc.explanation}); check "
            "mcp.servers.*.url and the token"
        ) from None
    id8 = server_id_for_name(name)
    kept, _ = usable(found.tools, id8=id8)
    try:
        return materialize_mcp(
            name=connector,
            id8=id8,
            config={"url": server.url},
            credentials={"token": token_env} if token_env else {},
            tools=kept,
        )
    except ConnectorConfigError as exc:
        raise AgentConfigError(f"{where}: {exc.field}: {exc.problem}") from None


def _oauth_server_connector(
    name: str, connector: str, server: McpServer, auth: McpAuth, oauth: dict[str, Any], *,
    env: Mapping[str, str], where: str,
) -> BuiltinConnectorDefs:  # fmt: skip
    """A server behind OAuth (B-23): discovered with a token from the token file the Tool Pod uses too
    (AGENTIC_MCP_OAUTH_DIR/mcp-<server>.json), so a `client_credentials` token or a person's login
    (`agentengine connectors login mcp-<server>`) serves both."""
    secrets = {"client_id": auth.client_id_env, "client_secret": auth.client_secret_env}
    credentials = {field: env_name for field, env_name in secrets.items() if env_name}
    tls = tls_context(None, env={}, connector=connector)
    session = OAuthSession(
        server=connector,
        mcp_url=server.url,
        settings=OAuthSettings.model_validate(oauth),
        store=TokenStore(connector),
        ssl_context=tls,
    )
    client_id = env.get(auth.client_id_env or "") or None
    client_secret = env.get(auth.client_secret_env or "") or None
    try:
        found = run_sync(_discover_oauth(server.url, tls, session, client_id, client_secret))
    except OAuthError as exc:
        raise AgentConfigError(f"{where}.auth: OAuth failed ({exc.category}: {exc.explanation})") from None
    except BuiltinToolError as exc:
        raise AgentConfigError(
            f"{where}: discovering the server's tools failed ({exc.category}: {exc.explanation}); check "
            "mcp.servers.*.url and auth"
        ) from None
    id8 = server_id_for_name(name)
    kept, _ = usable(found.tools, id8=id8)
    try:
        return materialize_mcp(
            name=connector,
            id8=id8,
            config={"url": server.url, "auth": oauth},
            credentials=credentials,
            tools=kept,
        )
    except ConnectorConfigError as exc:
        raise AgentConfigError(f"{where}: {exc.field}: {exc.problem}") from None


async def _discover_oauth(
    url: str, tls: Any, session: OAuthSession, client_id: str | None, client_secret: str | None
) -> ServerTools:
    token = await session.token(client_id=client_id, client_secret=client_secret)
    refused = False
    try:
        return await _discover(McpClient(url, ssl_context=tls), token)
    except BuiltinToolError as exc:
        if exc.status_code != 401:
            raise
        refused = True  # one fresh token after a 401, as the Tool Pod does
    if refused:
        token = await session.token(client_id=client_id, client_secret=client_secret, rejected=token)
    return await _discover(McpClient(url, ssl_context=tls), token)


async def _discover(client: McpClient, token: str | None) -> ServerTools:
    try:
        found = await client.list_tools(token=token)
        await client.close_session(token=token)
        return found
    finally:
        await client.aclose()


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to its end from sync code, also when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coroutine)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="mcp-discovery")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]
