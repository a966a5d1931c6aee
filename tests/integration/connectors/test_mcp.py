"""The MCP client and connector against a real MCP server (the official SDK) on loopback, JSON and SSE."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime.connectors import ConnectorError, bundle_from_agent_config
from agent_runtime.connectors.builtin.registry import create_connector
from agent_runtime.connectors.framework import BuiltinToolError
from agent_runtime.connectors.mcp.catalog import materialize_mcp, usable
from agent_runtime.connectors.mcp.client import McpClient
from tests.conftest import free_port
from tests.providers.mcp_peer import MCP_TOKEN, McpPeer, mcp_server

TOOL_COUNT = 12  # nine tools and three fillers: three pages of four


@pytest.fixture(scope="module", params=["json", "sse"])
def peer(request: pytest.FixtureRequest) -> Iterator[McpPeer]:
    with mcp_server(mode=request.param) as running:
        yield running


def run(coroutine):  # type: ignore[no-untyped-def]
    return asyncio.run(coroutine)


async def _list_and_call(url: str) -> tuple[list[str], dict, str | None]:
    client = McpClient(url, timeout_s=10)
    try:
        found = await client.list_tools(token=MCP_TOKEN)
        result = await client.call_tool("lookup", {"id": "7"}, token=MCP_TOKEN, declares_output=True)
        return [t["name"] for t in found.tools], result, client.session_id
    finally:
        await client.close_session(token=MCP_TOKEN)
        await client.aclose()


def test_handshake_every_page_and_a_call_in_one_session(peer: McpPeer) -> None:
    before = peer.stats()
    names, result, session = run(_list_and_call(peer.url))
    after = peer.stats()
    assert len(names) == TOOL_COUNT and names[:2] == ["lookup", "echo"] and "filler_02" in names
    # The server answered both ways; a tool that declares an output schema passes on the structured form.
    assert result == {"structuredContent": {"id": "7", "name": "item 7"}, "truncated": False}
    assert session  # the server named one, and every later request carried it
    methods = {k: after["methods"].get(k, 0) - before["methods"].get(k, 0) for k in after["methods"]}
    assert methods["initialize"] == 1 and methods["notifications/initialized"] == 1
    assert methods["tools/list"] == 3 and methods["tools/call"] == 1


async def _failures(url: str) -> dict[str, BuiltinToolError]:
    client = McpClient(url, timeout_s=2)
    found: dict[str, BuiltinToolError] = {}
    try:
        for name, arguments in (
            ("fail", {}),
            ("explode", {}),
            ("no_such_tool", {}),
            ("slow", {"seconds": 5}),
        ):
            try:
                await client.call_tool(name, arguments, token=MCP_TOKEN)
            except BuiltinToolError as exc:
                found[name] = exc
        try:
            await McpClient(url, timeout_s=5).list_tools(token="wrong-" + MCP_TOKEN)
        except BuiltinToolError as exc:
            found["wrong token"] = exc
        try:
            await McpClient(f"http://127.0.0.1:{free_port()}/mcp", timeout_s=5).list_tools(token=MCP_TOKEN)
        except BuiltinToolError as exc:
            found["down"] = exc
    finally:
        await client.aclose()
    return found


def test_errors_are_classified_and_never_carry_the_token(peer: McpPeer) -> None:
    found = run(_failures(peer.url))
    assert {name: exc.category for name, exc in found.items()} == {
        "fail": "tool_error",
        "explode": "server_error",
        "no_such_tool": "invalid_arguments",
        "slow": "timeout",
        "wrong token": "auth",
        "down": "connection",
    }
    assert "the item is locked" in found["fail"].explanation
    assert found["wrong token"].status_code == 401
    for exc in found.values():
        assert MCP_TOKEN not in exc.explanation and "127.0.0.1" not in exc.explanation
        assert exc.__context__ is None and exc.__cause__ is None


async def _expired_session(url: str) -> tuple[str | None, str, str]:
    client = McpClient(url, timeout_s=10)
    try:
        first = await client.call_tool("whoami", {}, token=MCP_TOKEN)
        client.session_id = "gone-" + str(first["content"][0]["text"])  # as if the server had dropped it
        second = await client.call_tool("whoami", {}, token=MCP_TOKEN)
        return client.session_id, first["content"][0]["text"], second["content"][0]["text"]
    finally:
        await client.aclose()


def test_a_dropped_session_is_started_again_and_the_call_sent_once_more(peer: McpPeer) -> None:
    before = peer.stats()["calls"].get("whoami", 0)
    session, first, second = run(_expired_session(peer.url))
    assert first and second and first != second and session == second
    assert peer.stats()["calls"]["whoami"] - before == 2  # the refused one never reached the tool


def test_a_big_result_is_cut_and_marked(peer: McpPeer) -> None:
    async def big() -> dict:
        client = McpClient(peer.url)
        try:
            return await client.call_tool("big", {"size": 300_000}, token=MCP_TOKEN)
        finally:
            await client.aclose()

    result = run(big())
    assert result["truncated"] is True and 190_000 < len(result["content"][0]["text"]) <= 200_000


def test_the_connector_the_tool_pod_runs_calls_by_the_servers_own_name(peer: McpPeer) -> None:
    async def scenario() -> tuple[object, BuiltinToolError]:
        found = await McpClient(peer.url).list_tools(token=MCP_TOKEN)
        kept, _ = usable(found.tools, id8="3f2a9c1e")
        defs = materialize_mcp(
            name="crm",
            id8="3f2a9c1e",
            config={"url": peer.url},
            credentials={"token": "CRM_MCP_TOKEN"},
            tools=kept,
        )
        connector = create_connector(defs)
        try:
            answer = await connector.execute(
                "mcp.3f2a9c1e.echo", {"text": "hi"}, env={"CRM_MCP_TOKEN": MCP_TOKEN}
            )
            try:
                await connector.execute("mcp.3f2a9c1e.echo", {"text": "hi"}, env={})
            except Exception as exc:
                missing = exc
            return answer, missing  # type: ignore[return-value]
        finally:
            await connector.aclose()

    answer, missing = run(scenario())
    assert answer == {"content": [{"type": "text", "text": "echo: hi"}], "truncated": False}
    assert "CRM_MCP_TOKEN" in str(missing) and MCP_TOKEN not in str(missing)


def test_tools_that_change_between_discoveries_are_seen_by_the_next_one() -> None:
    with mcp_server(mode="sse") as peer:
        first = run(McpClient(peer.url).list_tools(token=MCP_TOKEN))
        peer.set_generation(2)
        second = run(McpClient(peer.url).list_tools(token=MCP_TOKEN))
    names = [t["name"] for t in first.tools], [t["name"] for t in second.tools]
    assert "note" in names[0] and "added_later" not in names[0]
    assert "note" not in names[1] and "added_later" in names[1]


AGENT_YAML = """
version: 1
mcp:
  servers:
    crm:
      url: http://${CRM_HOST}:PORT/mcp
      auth: {token_env: CRM_MCP_TOKEN}
"""


def test_agent_yaml_mcp_servers_become_connectors_of_the_bundle(peer: McpPeer, tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(AGENT_YAML.replace("PORT", str(peer.port)))
    env = {"CRM_HOST": "127.0.0.1", "CRM_MCP_TOKEN": MCP_TOKEN, "OPENAI_API_KEY": "sk-x"}
    bundle = bundle_from_agent_config(config, env=env)
    (defs,) = bundle.builtins
    assert defs.name == "mcp-crm" and defs.type == "mcp" and len(defs.tools) == TOOL_COUNT
    assert defs.config["url"] == peer.url and defs.credentials == {"token": "CRM_MCP_TOKEN"}
    sensitive = {t.name.split(".", 2)[2]: t.sensitive for t in defs.tools}
    assert (sensitive["lookup"], sensitive["delete_item"], sensitive["note"]) == (False, True, True)
    assert MCP_TOKEN.encode() not in b"".join(bundle.files.values())
    again = bundle_from_agent_config(config, env=env)
    assert again.digest == bundle.digest  # same server, same tools: same bytes

    config.write_text(AGENT_YAML.replace("${CRM_HOST}", "${OPENAI_API_KEY}").replace("PORT", str(peer.port)))
    with pytest.raises(ConnectorError, match=r"mcp\.servers\.crm\.url: \$\{OPENAI_API_KEY\} is not a tenant"):
        bundle_from_agent_config(config, env=env)
    config.write_text(AGENT_YAML.replace("PORT", str(peer.port)))
    with pytest.raises(ConnectorError, match=r"mcp\.servers\.crm\.auth\.token_env: CRM_MCP_TOKEN is not set"):
        bundle_from_agent_config(config, env={"CRM_HOST": "127.0.0.1"})
    with pytest.raises(
        ConnectorError, match=r"mcp\.servers\.crm: discovering the server's tools failed \(auth"
    ):
        bundle_from_agent_config(config, env={**env, "CRM_MCP_TOKEN": "wrong"})
