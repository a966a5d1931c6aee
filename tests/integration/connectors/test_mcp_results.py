"""What a model is sent of an MCP result, against a real FastMCP-style server (the official SDK's
`MCPServer`), JSON and SSE: the bundle keeps `title`, `outputSchema` and `_meta` (never a token a server
quotes in them); a tool with an output schema answers with `structuredContent` alone, one without with its
text alone; a result near the cap is not doubled, and one over it is cut to the cap."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from agent_runtime.connectors.builtin.registry import create_connector
from agent_runtime.connectors.bundle import build_bundle, read_full_bundle, write_bundle
from agent_runtime.connectors.framework import BuiltinConnectorDefs
from agent_runtime.connectors.mcp.catalog import materialize_mcp, usable
from agent_runtime.connectors.mcp.client import McpClient
from agent_runtime.connectors.policy import MAX_RESPONSE_BYTES
from agent_runtime.llm.messages import to_openai_tools
from agent_runtime.servers.tool_surface import routed_tool_surface
from tests.providers.mcp_peer import MCP_TOKEN, mcp_server
from tests.providers.mcp_structured_peer import StructuredPeer, structured_server

ID8 = "5e1f0a2b"


@pytest.fixture(scope="module", params=["json", "sse"])
def peer(request: pytest.FixtureRequest) -> Iterator[StructuredPeer]:
    with structured_server(mode=request.param) as running:
        yield running


@pytest.fixture(scope="module")
def defs(peer: StructuredPeer, tmp_path_factory: pytest.TempPathFactory) -> BuiltinConnectorDefs:
    """Discovered, materialized, written as a bundle and read back, as the Tool Pod gets it."""

    async def discover() -> list[dict[str, Any]]:
        client = McpClient(peer.url, timeout_s=10)
        try:
            return (await client.list_tools()).tools
        finally:
            await client.close_session()
            await client.aclose()

    kept, skipped = usable(asyncio.run(discover()), id8=ID8)
    assert not skipped
    made = materialize_mcp(name="weather", id8=ID8, config={"url": peer.url}, credentials={}, tools=kept)
    index = write_bundle(build_bundle([], [made]), tmp_path_factory.mktemp("bundle"))
    _, builtins, _ = read_full_bundle(index)
    return builtins[0]


def call(defs: BuiltinConnectorDefs, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        connector = create_connector(defs)
        try:
            return await connector.execute(f"mcp.{ID8}.{tool}", arguments, env={})  # type: ignore[no-any-return]
        finally:
            await connector.aclose()

    return asyncio.run(run())


def sent_bytes(result: dict[str, Any]) -> int:
    return len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode())


def test_the_bundle_keeps_title_meta_and_output_schema(defs: BuiltinConnectorDefs) -> None:
    tools = {t.name.rsplit(".", 1)[1]: t for t in defs.tools}
    forecast = tools["forecast"]
    assert forecast.title == "Weather forecast"
    assert forecast.meta == {"ui": {"icon": "sun"}, "category": "weather"}
    assert forecast.output_schema is not None and set(forecast.output_schema["properties"]) == {
        "city",
        "high_c",
        "sky",
    }
    assert tools["shout"].output_schema is None and tools["shout"].title is None
    # Over the 32 KiB bound: the schema is left out, the tool still offered (its results then as text).
    assert tools["huge_schema"].output_schema is None
    data = json.loads(defs.dumps())
    entry = next(t for t in data["tools"] if t["name"].endswith(".forecast"))
    assert {"title", "outputSchema", "_meta"} <= set(entry)
    shout = next(t for t in data["tools"] if t["name"].endswith(".shout"))
    assert not {"title", "outputSchema", "_meta"} & set(shout)
    # The display name reaches the AER's GET /tools (the console's); the model's tool list leaves it out.
    surface = {s["name"]: s for s in routed_tool_surface(connectors=[], tenant_tools=[], builtins=[defs])}
    assert surface[f"mcp.{ID8}.forecast"]["title"] == "Weather forecast"
    assert "outputSchema" not in surface[f"mcp.{ID8}.forecast"]
    offered = to_openai_tools(list(surface.values()))
    assert all(set(t["function"]) == {"name", "description", "parameters"} for t in offered)


def test_a_tool_with_an_output_schema_answers_with_structured_content_alone(
    defs: BuiltinConnectorDefs,
) -> None:
    # FastMCP sent both: the text block holding the same JSON is not passed on.
    assert call(defs, "forecast", {"city": "Oslo"}) == {
        "structuredContent": {"city": "Oslo", "high_c": 21, "sky": "clear"},
        "truncated": False,
    }


def test_a_tool_without_an_output_schema_answers_with_its_text_alone(defs: BuiltinConnectorDefs) -> None:
    text = {"content": [{"type": "text", "text": "HI"}], "truncated": False}
    assert call(defs, "shout", {"text": "hi"}) == text


def test_a_result_near_the_cap_is_sent_once_and_whole(defs: BuiltinConnectorDefs) -> None:
    size = 120_000  # sent both ways it would take 240,000 bytes, over the cap
    result = call(defs, "sized", {"size": size})
    assert result["truncated"] is False and "content" not in result
    assert result["structuredContent"] == {"payload": "s" * size}
    assert sent_bytes(result) <= MAX_RESPONSE_BYTES


def test_a_result_over_the_cap_is_cut_to_it_and_says_what_it_left_out(defs: BuiltinConnectorDefs) -> None:
    result = call(defs, "sized", {"size": 300_000})
    assert result["truncated"] is True and "structuredContent" not in result
    assert result["dropped"][0]["type"] == "structuredContent" and result["dropped"][0]["bytes"] > 300_000
    assert result["content"][0]["text"].startswith('{\n  "payload": "sss')  # the start of its text copy
    assert MAX_RESPONSE_BYTES - 4096 < sent_bytes(result) <= MAX_RESPONSE_BYTES


def test_a_token_a_server_quotes_in_a_title_or_meta_reaches_no_bundle() -> None:
    """A careless server quotes the listing's Authorization header in a tool's title and `_meta` (raw,
    base64, hex): discovery keeps the fields but not the token, in any form, in the bundle."""

    async def discover(url: str) -> list[dict[str, Any]]:
        client = McpClient(url, timeout_s=10)
        try:
            return (await client.list_tools(token=MCP_TOKEN)).tools
        finally:
            await client.aclose()

    with mcp_server(mode="json", echo_auth=True) as careless:
        listed = asyncio.run(discover(careless.url))
        kept, _ = usable(listed, id8=ID8)
        made = materialize_mcp(name="crm", id8=ID8, config={"url": careless.url}, credentials={}, tools=kept)
    echo = next(t for t in made.tools if t.name.endswith(".echo_auth"))
    assert echo.title is not None and echo.title.startswith("auth Bearer") and echo.meta is not None
    text = build_bundle([], [made]).files["crm.yaml"].decode() + json.dumps(listed)
    header = f"Bearer {MCP_TOKEN}".encode()
    forms = (MCP_TOKEN, base64.b64encode(header).decode(), header.hex())
    leaked = [index for index, form in enumerate(forms) if form in text]  # indexes: no token in the output
    assert leaked == []
