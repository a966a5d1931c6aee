"""An MCP tool's `title`, `outputSchema` and `_meta`: kept within bounds, carried by the bundle, absent ones
leaving every byte (and digest) as before."""

from __future__ import annotations

import json

from agent_runtime.connectors import build_bundle
from agent_runtime.connectors.builtin.registry import create_connector
from agent_runtime.connectors.mcp.catalog import (
    MAX_META_BYTES,
    MAX_OUTPUT_SCHEMA_BYTES,
    MAX_TITLE,
    DiscoveredTool,
    catalog_digest,
    from_server,
    materialize_mcp,
)

OUT = {"type": "object", "properties": {"city": {"type": "string"}}}


def found(**raw: object) -> DiscoveredTool:
    tool = from_server({"name": "forecast", **raw})
    assert isinstance(tool, DiscoveredTool)
    return tool


def test_title_output_schema_and_meta_are_kept() -> None:
    tool = found(title="Weather forecast", outputSchema=OUT, _meta={"ui": {"icon": "sun"}})
    assert (tool.title, tool.output_schema, tool.meta) == ("Weather forecast", OUT, {"ui": {"icon": "sun"}})
    dumped = tool.model_dump(mode="json", by_alias=True)
    assert dumped["outputSchema"] == OUT and dumped["_meta"] == {"ui": {"icon": "sun"}}
    assert DiscoveredTool.model_validate(dumped) == tool  # the Connector's status reads back the same


def test_the_older_annotations_title_stands_in_and_titles_are_bounded_and_printable() -> None:
    assert found(annotations={"title": "Old style"}).title == "Old style"
    assert found(title="New", annotations={"title": "Old"}).title == "New"
    long = found(title="T" * 1000).title
    assert long is not None and len(long) == MAX_TITLE and long.endswith("…")
    assert found(title="a\x1b[31m\nb").title == "a [31m b"
    assert found(title="   ").title is None and found(title=7).title is None


def test_oversized_or_odd_schemas_and_meta_are_left_out_but_the_tool_kept() -> None:
    huge = {"type": "object", "description": "d" * MAX_OUTPUT_SCHEMA_BYTES}
    assert found(outputSchema=huge).output_schema is None
    assert found(outputSchema={"type": "string"}).output_schema is None  # MCP: an object schema
    assert found(outputSchema=["not", "an", "object"]).output_schema is None
    assert found(_meta={"blob": "m" * MAX_META_BYTES}).meta is None
    assert found(_meta={"when": float("nan")}).meta is None  # not plain JSON
    assert found(outputSchema=huge).name == "forecast"


def test_absent_fields_leave_the_digest_and_the_bundle_bytes_as_before() -> None:
    plain = found(description="d")
    assert plain.model_dump(mode="json", by_alias=True) == {
        "name": "forecast",
        "description": "d",
        "inputSchema": {"type": "object"},
        "readOnly": False,
    }
    assert catalog_digest([plain]) != catalog_digest([found(description="d", title="Forecast")])
    defs = materialize_mcp(name="weather", id8="0a1b2c3d", config={"url": "http://127.0.0.1:1/mcp"},
                           credentials={}, tools=[plain])  # fmt: skip
    entry = json.loads(defs.dumps())["tools"][0]
    assert set(entry) == {"name", "description", "inputSchema", "sensitive"}


def test_the_bundle_carries_them_and_the_tool_pod_knows_which_tools_answer_structured() -> None:
    forecast = found(title="Weather forecast", outputSchema=OUT, _meta={"k": "v"})
    tools = [forecast, DiscoveredTool(name="shout")]
    defs = materialize_mcp(name="weather", id8="0a1b2c3d", config={"url": "http://127.0.0.1:1/mcp"},
                           credentials={}, tools=tools)  # fmt: skip
    bundle = build_bundle([], [defs])
    entry = json.loads(bundle.files["weather.yaml"])["tools"][0]
    assert (entry["title"], entry["outputSchema"], entry["_meta"]) == ("Weather forecast", OUT, {"k": "v"})
    assert defs.tool_schemas()[0]["title"] == "Weather forecast" and "title" not in defs.tool_schemas()[1]
    assert create_connector(defs).structured == frozenset({"forecast"})  # type: ignore[attr-defined]
