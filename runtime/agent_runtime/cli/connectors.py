"""`agentengine connectors`: the types the OE knows, a connector's test in its Tool Pod, and the authoring
commands of `python -m agent_runtime.connectors` (compile, scaffold, regenerate, bundle) under one name."""

from __future__ import annotations

import click

from agent_runtime.cli.errors import ERROR, USAGE, CliError
from agent_runtime.cli.executions import agent_ref
from agent_runtime.cli.output import emit, output_option
from agent_runtime.cli.session import open_client

TYPE_COLUMNS = (
    ("TYPE", lambda row: row.get("type")),
    ("DESCRIPTION", lambda row: row.get("description")),
    ("SECRETS", lambda row: ",".join(str(s.get("field")) for s in row.get("secrets") or [])),
    ("TOOLS", lambda row: len(row.get("tools") or [])),
)


@click.group()
def connectors() -> None:
    """Connector types, a connector's test in its Tool Pod, and the authoring commands."""


@connectors.command("types")
@output_option
@click.pass_context
def types(ctx: click.Context, output: str) -> None:
    """The built-in connector types the OE knows, with their secrets (names only) and tools."""
    client, _ = open_client(ctx)
    with client:
        page = client.connector_types()
    emit(page, output=output, rows=page.get("types", []), columns=TYPE_COLUMNS)


@connectors.command("test")
@click.argument("name")
@click.option("-a", "--agent", required=True, help="the Agent whose connector NAME is (NAME or NS/NAME)")
@output_option
@click.pass_context
def test(ctx: click.Context, name: str, agent: str, output: str) -> None:
    """Run connector NAME's test_connection in the Agent's Tool Pod, where its credential lives."""
    client, where = open_client(ctx)
    with client:
        result = client.test_connector(agent=agent_ref(agent, where.namespace), connector=name)
    emit(result, output=output)
    if not result.get("ok"):
        detail = result.get("detail") or "no detail"
        raise CliError(f"connector {name}: the test failed: {detail}", exit_code=ERROR)


def _authoring(argv: list[str]) -> None:
    """Run one authoring command; its own `error: ...` line is the message, exit 2 its code."""
    from agent_runtime.connectors.__main__ import main as authoring_main

    code = authoring_main(argv)
    if code:
        raise click.exceptions.Exit(USAGE)


@connectors.command("compile")
@click.argument("document", type=click.Path(dir_okay=False))
@click.option("--name", required=True, help="connector name (the tool name prefix)")
@click.option("-o", "--output", default="tool_defs.yaml", show_default=True)
def compile_document(document: str, name: str, output: str) -> None:
    """OpenAPI 3.0 document -> tool_defs.yaml (every operation, or a skip with its reason)."""
    _authoring(["compile", document, "--name", name, "-o", output])


@connectors.command("scaffold")
@click.argument("tool_defs", type=click.Path(dir_okay=False))
@click.option("--base-url", help="the provider's API root (default: the document's server)")
@click.option("-o", "--output", help="default: tool.yaml beside TOOL_DEFS")
@click.option("--force", is_flag=True, help="overwrite an existing tool.yaml")
def scaffold(tool_defs: str, base_url: str | None, output: str | None, force: bool) -> None:
    """tool_defs.yaml -> a starter tool.yaml next to it."""
    argv = ["scaffold", tool_defs]
    argv += ["--base-url", base_url] if base_url else []
    argv += ["-o", output] if output else []
    argv += ["--force"] if force else []
    _authoring(argv)


@connectors.command("regenerate")
@click.argument("tool_defs", type=click.Path(dir_okay=False))
@click.argument("document", type=click.Path(dir_okay=False))
@click.option("-o", "--output", help="default: overwrite TOOL_DEFS")
def regenerate(tool_defs: str, document: str, output: str | None) -> None:
    """tool_defs.yaml + a newer document -> updated tool_defs.yaml, tool names kept, changes listed."""
    _authoring(["regenerate", tool_defs, document, *(["-o", output] if output else [])])


@connectors.command("bundle")
@click.argument("agent_config", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, help="the bundle directory")
def bundle(agent_config: str, output: str) -> None:
    """agent.yaml -> a bundle directory (what AGENTIC_CONNECTOR_BUNDLE_PATH points at), digest printed."""
    _authoring(["bundle", agent_config, "-o", output])


@connectors.command("login")
@click.argument("name")
@click.option("--url", required=True, help="the MCP server's endpoint (the connector's config.url)")
@click.option("--scope", help="scopes to ask for, space-separated")
@click.option("--authorization-server", help="the issuer the server must name (as auth.authorization_server)")
@click.option("--client-id", help="a client registered for you (default: register one, RFC 7591)")
@click.option(
    "--client-secret-env", metavar="VAR", help="the environment variable holding --client-id's secret"
)
@click.option("--port", type=int, default=0, help="the loopback redirect's port (default: any free one)")
@click.option("--no-browser", is_flag=True, help="print the consent URL, do not open a browser")
@click.option("--wait", type=float, default=300.0, show_default=True, help="seconds to wait for the consent")
def login(
    name: str,
    url: str,
    scope: str | None,
    authorization_server: str | None,
    client_id: str | None,
    client_secret_env: str | None,
    port: int,
    no_browser: bool,
    wait: float,
) -> None:
    """A person's consent for MCP connector NAME (OAuth authorization code with PKCE, a redirect to
    127.0.0.1); the refresh token is kept in AGENTIC_MCP_OAUTH_DIR/NAME.json (mode 0600)."""
    from agent_runtime.cli.mcp_login import run_login

    run_login(
        name,
        url=url,
        scope=scope,
        authorization_server=authorization_server,
        client_id=client_id,
        client_secret_env=client_secret_env,
        port=port,
        open_browser=not no_browser,
        wait_s=wait,
    )
