"""The compiled format: round trips, detached schemas, strict JSON values, version checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime.connectors import ConnectorError, ToolDefinitions, compile_catalog, load_tool_defs
from agent_runtime.connectors.documents import check_json_value, load_yaml, parse_document_text
from tests.unit.connectors.sample_documents import jira_document


def test_write_then_load_is_equal_and_text_is_deterministic(tmp_path: Path) -> None:
    catalog = compile_catalog(jira_document(), connector_name="jiradc")
    path = catalog.write(tmp_path / "tool_defs.yaml")
    loaded = load_tool_defs(path)
    assert loaded == catalog
    assert (
        loaded.dumps() == catalog.dumps() == compile_catalog(jira_document(), connector_name="jiradc").dumps()
    )


def test_tool_schemas_are_detached() -> None:
    catalog = compile_catalog(jira_document(), connector_name="jiradc")
    schemas = catalog.tool_schemas()
    assert set(schemas[0]) == {"name", "description", "inputSchema"}
    schemas[0]["inputSchema"]["properties"].clear()
    schemas[0]["inputSchema"]["required"].append("x")
    assert catalog.tool_schemas()[0]["inputSchema"] == catalog.tools[0].input_schema
    assert catalog.tools[0].input_schema["properties"]


def test_non_json_values_are_rejected_with_their_path() -> None:
    text = compile_catalog(jira_document(), connector_name="jiradc").dumps()
    data = parse_document_text(text)
    data["tools"][0]["inputSchema"]["properties"]["startAt"]["default"] = float("nan")
    with pytest.raises(ConnectorError, match="inputSchema/properties/startAt/default"):
        ToolDefinitions.from_data(data)
    yaml_text = (
        "format_version: 1\nname: x\ntools:\n"
        "- {name: x_a, method: GET, path: /a, inputSchema: {d: 2020-01-02}}\n"
    )
    with pytest.raises(ConnectorError, match="inputSchema/d"):
        ToolDefinitions.loads(yaml_text)
    with pytest.raises(ConnectorError, match="key 1 is a int"):
        check_json_value({"a": {1: "x"}}, where="s")


def test_unknown_format_version_is_refused_with_the_fix() -> None:
    with pytest.raises(ConnectorError, match="recompile"):
        ToolDefinitions.loads('{"format_version": 2, "name": "x", "tools": []}')


def test_load_tool_defs_refuses_urls_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ConnectorError, match="local files only"):
        load_tool_defs("https://example.invalid/tool_defs.yaml")
    with pytest.raises(ConnectorError, match="does not exist"):
        load_tool_defs(tmp_path / "missing.yaml")


def test_event_built_yaml_matches_pyyaml_safe_load() -> None:
    import yaml

    text = (
        "a: &x {b: [1, 2.5, yes, null, 2020-01-02, '3', 0x1f, .inf, 1_000, -.5, +1, ~, off]}\n"
        "c: *x\nd: !!str 5\ne: |\n  block\nf: 'quoted: yes'\n200: ok\n"
    )
    assert load_yaml(text) == yaml.safe_load(text)


def test_yaml_syntax_errors_name_the_line() -> None:
    with pytest.raises(ConnectorError, match="line 2"):
        parse_document_text("a: 1\n b: [\n")
