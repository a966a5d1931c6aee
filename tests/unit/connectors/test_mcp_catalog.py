"""MCP tools as connector tools (C-08, Decision 18): names, safety, selection, the bundle file."""

from __future__ import annotations

import pytest

from agent_runtime.connectors import build_bundle
from agent_runtime.connectors.builtin.registry import create_connector, materialize_builtin, registry
from agent_runtime.connectors.framework import ConnectorConfigError
from agent_runtime.connectors.mcp.catalog import (
    DiscoveredTool,
    catalog_digest,
    materialize_mcp,
    original_name,
    select,
    server_id,
    server_id_for_name,
    usable,
)
from agent_runtime.toolnames import ToolNameMap

OBJECT = {"type": "object", "properties": {"id": {"type": "string"}}}
RAW = [
    {"name": "lookup", "description": "read", "inputSchema": OBJECT, "annotations": {"readOnlyHint": True}},
    {"name": "delete_item", "inputSchema": OBJECT, "annotations": {"readOnlyHint": False}},
    {"name": "note", "inputSchema": OBJECT},
    {"name": "hinted_string", "inputSchema": OBJECT, "annotations": {"readOnlyHint": "true"}},
    {"name": "dotted.name-1", "inputSchema": OBJECT, "annotations": {"readOnlyHint": True}},
]


def test_id8_comes_from_the_uid_and_names_keep_the_servers_own() -> None:
    assert server_id("3f2a9c1e-77aa-4b1d-9e0f-0123456789ab") == "3f2a9c1e"
    assert server_id("3F2A-9C1E-77AA") == "3f2a9c1e"
    with pytest.raises(ConnectorConfigError, match=r"metadata\.uid"):
        server_id("uid-x")
    assert original_name("mcp.3f2a9c1e.dotted.name-1") == "dotted.name-1"
    assert server_id_for_name("tableau") == server_id_for_name("tableau") != server_id_for_name("other")


def test_a_tool_is_sensitive_unless_the_server_marks_it_read_only() -> None:
    kept, skipped = usable(RAW, id8="3f2a9c1e")
    assert skipped == []
    assert {t.name: t.sensitive for t in kept} == {
        "lookup": False,
        "delete_item": True,
        "note": True,  # no annotation: sensitive
        "hinted_string": True,  # only a JSON true counts
        "dotted.name-1": False,
    }


def test_tools_a_model_cannot_be_shown_are_skipped_with_the_reason_not_renamed() -> None:
    raw = [
        {"name": "ok"},
        {"name": "has space"},
        {"name": "x" * 60},
        {"name": "ok"},
        {"name": "bad_schema", "inputSchema": ["not", "an", "object"]},
        {"description": "nameless"},
    ]
    kept, skipped = usable(raw, id8="3f2a9c1e")
    assert [t.name for t in kept] == ["ok"]
    reasons = {s.tool[:10]: s.reason for s in skipped}
    assert "characters" in reasons["has space"] and "too long" in reasons["x" * 10]
    assert "same name" in reasons["ok"] and "inputSchema" in reasons["bad_schema"]
    assert len(skipped) == 5
    assert kept[0].input_schema == {"type": "object"}  # none given: an object


def test_expose_allow_takes_server_names_or_canonical_names_and_names_unknown_ones() -> None:
    kept, _ = usable(RAW, id8="3f2a9c1e")
    assert [t.name for t in select(kept, id8="3f2a9c1e", allow=["lookup", "mcp.3f2a9c1e.note"])] == [
        "lookup",
        "note",
    ]
    assert len(select(kept, id8="3f2a9c1e", allow=["*"])) == len(kept)
    with pytest.raises(ConnectorConfigError, match=r"expose\.allow") as caught:
        select(kept, id8="3f2a9c1e", allow=["nope"])
    assert "nope" in caught.value.problem


def test_the_bundle_file_carries_prefixed_names_sensitivity_and_the_token_env_only() -> None:
    kept, _ = usable(RAW, id8="3f2a9c1e")
    defs = materialize_mcp(
        name="crm",
        id8="3f2a9c1e",
        config={"url": "https://mcp.example.com/mcp"},
        credentials={"token": "CRM_MCP_TOKEN"},
        tools=kept,
    )
    assert defs.type == "mcp" and defs.config == {
        "url": "https://mcp.example.com/mcp",
        "timeout_s": 30,
        "server_id": "3f2a9c1e",
    }
    assert {t.name: t.sensitive for t in defs.tools}["mcp.3f2a9c1e.delete_item"] is True
    names = ToolNameMap.of(t.name for t in defs.tools)
    assert names.model("mcp.3f2a9c1e.dotted.name-1") == "mcp__3f2a9c1e__dotted__name-1"
    bundle = build_bundle([], [defs])
    assert b"CRM_MCP_TOKEN" in bundle.files["crm.yaml"] and bundle.tool_count == len(kept)
    same = materialize_mcp(
        name="crm", id8="3f2a9c1e", config=defs.config, credentials={"token": "CRM_MCP_TOKEN"}, tools=kept
    )
    again = build_bundle([], [same])
    assert again.digest == bundle.digest
    live = create_connector(defs)
    assert live.name == "crm" and live.client.url == "https://mcp.example.com/mcp"


@pytest.mark.parametrize(
    ("config", "credentials", "field"),
    [
        ({}, {}, "config.url"),
        ({"url": "ftp://x"}, {}, "config.url"),
        ({"url": "https://x/mcp", "timeout_s": 0}, {}, "config.timeout_s"),
        ({"url": "https://x/mcp", "surprise": 1}, {}, "config.surprise"),
        ({"url": "https://x/mcp"}, {"password": "P"}, "credentials.password"),
        ({"url": "https://x/mcp"}, {"token": "not an env"}, "credentials.token"),
    ],
)
def test_a_bad_config_names_the_field(config: dict, credentials: dict, field: str) -> None:
    with pytest.raises(ConnectorConfigError) as caught:
        materialize_mcp(name="crm", id8="3f2a9c1e", config=config, credentials=credentials, tools=[])
    assert caught.value.field == field


def test_the_registry_knows_mcp_but_its_tools_come_from_discovery() -> None:
    assert "mcp" in registry()
    with pytest.raises(ConnectorConfigError, match=r"mcp\.servers"):
        materialize_builtin(name="crm", type_name="mcp", config={"url": "https://x/mcp"})


def test_the_digest_changes_exactly_when_the_tools_change() -> None:
    one = [DiscoveredTool(name="a"), DiscoveredTool(name="b", readOnly=True)]
    assert catalog_digest(one) == catalog_digest(list(one))
    assert catalog_digest(one) != catalog_digest([DiscoveredTool(name="a"), DiscoveredTool(name="b")])
