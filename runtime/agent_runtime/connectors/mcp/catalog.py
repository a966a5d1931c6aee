"""What a discovery yields, and how it becomes a bundle file: names, safety and selection. Pure.

A tool of MCP server `id8` is named `mcp.<id8>.<tool>` (Decision 10 keeps the dots; a model sees
`mcp__<id8>__<tool>`), `id8` being the first 8 hex digits of the Connector's UID (or, for an `agent.yaml`
server, of the sha256 of its name), so two servers never share a name and a rename of the URL keeps every
name. The server is called with the original name. A tool is sensitive unless the server marks it
`annotations.readOnlyHint: true` (C-08): the OE's default policy then holds it for approval.

A tool whose name cannot be shown to a model (a character outside letters, digits, `_`, `-` and `.`, or
too long once prefixed) is skipped with the reason, never renamed: the server must be called with the
name it gave.

Kept besides, each within a bound and left out (the tool still offered) past it: `title` (the display name
a person sees, MAX_TITLE characters; the older `annotations.title` when there is no `title`),
`outputSchema` (a JSON object schema of at most MAX_OUTPUT_SCHEMA_BYTES; the Tool Pod then sends the model
a result's `structuredContent`, `result.py`) and `_meta` (the server's own metadata for clients, at most
MAX_META_BYTES). None of them reaches the model's tool list.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_runtime.connectors.documents import check_json_value
from agent_runtime.connectors.framework import (
    ENV_NAME,
    BuiltinConnectorDefs,
    BuiltinToolSpec,
    ConnectorConfigError,
    apply_defaults,
    validate_value,
)
from agent_runtime.connectors.mcp.oauth import AUTH_SCHEMA, OAUTH_CREDENTIALS
from agent_runtime.toolnames import ToolNameError, to_model_name

MCP_TYPE = "mcp"
PREFIX = "mcp"
_UID_HEX = re.compile(r"[^0-9a-f]")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
MAX_DESCRIPTION = 4000
MAX_TITLE = 200
MAX_OUTPUT_SCHEMA_BYTES = 32 * 1024
MAX_META_BYTES = 8 * 1024
_OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}
# The `mcp` type's config (its tools come from discovery, not from config).
CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["url"],
    "additionalProperties": False,
    "properties": {
        "url": {
            "type": "string",
            "pattern": r"^https?://[^\s/?#]+[^\s]*$",
            "maxLength": 2048,
            "description": "the server's Streamable HTTP endpoint, e.g. https://mcp.example.com/mcp",
        },
        "timeout_s": {"type": "number", "minimum": 1, "maximum": 120, "default": 30},
        "server_id": {
            "type": "string",
            "pattern": "^[0-9a-f]{8}$",
            "description": "set by discovery: the id8 in the tools' names (from the Connector's UID)",
        },
        "auth": AUTH_SCHEMA,  # OAuth 2.1 (the MCP authorization spec) instead of a static token
    },
}
CREDENTIALS = {"token": "a bearer token sent as Authorization: Bearer (optional)", **OAUTH_CREDENTIALS}


class DiscoveredTool(BaseModel):
    """One tool as discovered (the server's own name), what the Connector's status and the bundle keep."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True, frozen=True)

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: dict(_OBJECT_SCHEMA), alias="inputSchema")
    read_only: bool = Field(default=False, alias="readOnly")
    # Absent ones are left out of the status and the digest, so a catalog without them keeps its bytes.
    title: str | None = Field(default=None, exclude_if=lambda v: v is None)
    output_schema: dict[str, Any] | None = Field(
        default=None, alias="outputSchema", exclude_if=lambda v: v is None
    )
    meta: dict[str, Any] | None = Field(default=None, alias="_meta", exclude_if=lambda v: v is None)

    @property
    def sensitive(self) -> bool:
        return not self.read_only


class Skipped(BaseModel):
    model_config = ConfigDict(frozen=True)

    tool: str
    reason: str


def server_id(uid: str) -> str:
    """`id8`: the first 8 hex digits of a Connector's UID (dashes dropped)."""
    digits = _UID_HEX.sub("", uid.lower())
    if len(digits) < 8:
        raise ConnectorConfigError("metadata.uid", "has fewer than 8 hex digits; the API server sets it")
    return digits[:8]


def server_id_for_name(name: str) -> str:
    """`id8` of an `agent.yaml` server, which has no UID: stable across URL changes, distinct per name."""
    return hashlib.sha256(f"mcp.servers.{name}".encode()).hexdigest()[:8]


def tool_name(id8: str, tool: str) -> str:
    return f"{PREFIX}.{id8}.{tool}"


def original_name(canonical: str) -> str:
    """The server's own name behind `mcp.<id8>.<tool>` (a tool's own dots are kept)."""
    parts = canonical.split(".", 2)
    if len(parts) != 3 or parts[0] != PREFIX:
        raise ValueError(f"{canonical!r} is not an MCP tool name (mcp.<id8>.<tool>)")
    return parts[2]


def from_server(raw: Mapping[str, Any]) -> DiscoveredTool | Skipped:
    """A tool from a `tools/list` page, or why it cannot be offered."""
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        return Skipped(tool=str(name)[:80], reason="the server gave it no name")
    schema = raw.get("inputSchema")
    if schema is None:
        schema = dict(_OBJECT_SCHEMA)
    if not isinstance(schema, dict):
        return Skipped(tool=name[:80], reason="its inputSchema is not a JSON object")
    try:
        check_json_value(schema, where="inputSchema")
    except ValueError:
        return Skipped(tool=name[:80], reason="its inputSchema is not plain JSON")
    annotations = raw.get("annotations")
    read_only = isinstance(annotations, dict) and annotations.get("readOnlyHint") is True
    description = raw.get("description")
    text = description if isinstance(description, str) else ""
    return DiscoveredTool(
        name=name,
        description=text[:MAX_DESCRIPTION],
        inputSchema=schema,
        readOnly=read_only,
        title=display_title(raw),
        outputSchema=bounded_json(raw.get("outputSchema"), limit=MAX_OUTPUT_SCHEMA_BYTES, schema=True),
        _meta=bounded_json(raw.get("_meta"), limit=MAX_META_BYTES),
    )


def display_title(raw: Mapping[str, Any]) -> str | None:
    """The name a person is shown: `title`, else the older `annotations.title`; printable, bounded."""
    annotations = raw.get("annotations")
    for found in (raw.get("title"), annotations.get("title") if isinstance(annotations, dict) else None):
        if isinstance(found, str):
            text = " ".join("".join(c if c.isprintable() else " " for c in found).split())
            if text:
                return text if len(text) <= MAX_TITLE else text[: MAX_TITLE - 1] + "…"
    return None


def bounded_json(value: Any, *, limit: int, schema: bool = False) -> dict[str, Any] | None:
    """`value` when it is a plain JSON object within `limit` bytes (an object schema, if `schema`), else
    None: an oversized or odd one is left out rather than cut, since a cut schema would mislead."""
    if not isinstance(value, dict) or not value:
        return None
    try:
        check_json_value(value, where="value")
    except ValueError:
        return None
    if schema and value.get("type") != "object":
        return None  # MCP requires an output schema of type object; structuredContent is an object
    if len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()) > limit:
        return None
    return value


def usable(raw_tools: Iterable[Mapping[str, Any]], *, id8: str) -> tuple[list[DiscoveredTool], list[Skipped]]:
    """Every tool a model can be offered under `mcp.<id8>.<tool>`, in the server's order; the rest skipped."""
    kept: list[DiscoveredTool] = []
    skipped: list[Skipped] = []
    names: set[str] = set()
    models: set[str] = set()
    for raw in raw_tools:
        found = from_server(raw)
        if isinstance(found, Skipped):
            skipped.append(found)
            continue
        if not _TOOL_NAME.match(found.name):
            skipped.append(
                Skipped(tool=found.name[:80], reason="its name holds characters a model cannot see")
            )
            continue
        try:
            model = to_model_name(tool_name(id8, found.name))
        except ToolNameError:
            skipped.append(Skipped(tool=found.name[:80], reason="its name is too long to show to a model"))
            continue
        if found.name in names or model in models:
            skipped.append(
                Skipped(tool=found.name[:80], reason="another tool of the server has the same name")
            )
            continue
        names.add(found.name)
        models.add(model)
        kept.append(found)
    return kept, skipped


def select(tools: Sequence[DiscoveredTool], *, id8: str, allow: Sequence[str] | None) -> list[DiscoveredTool]:
    """`expose.allow` applied: server names or `mcp.<id8>.<tool>`; None or "*" keeps every tool."""
    if allow is None or "*" in allow:
        return list(tools)
    by_key = {t.name: t for t in tools} | {tool_name(id8, t.name): t for t in tools}
    unknown = [entry for entry in allow if entry not in by_key]
    if unknown:
        known = ", ".join(t.name for t in tools[:30]) or "none"
        raise ConnectorConfigError(
            "expose.allow", f"{unknown} name no tool the MCP server lists (tools: {known})"
        )
    chosen = {by_key[entry].name for entry in allow}
    return [t for t in tools if t.name in chosen]


def catalog_digest(tools: Sequence[DiscoveredTool]) -> str:
    """sha256 of the tools as kept (canonical JSON): changes exactly when what the bundle gets changes."""
    data = [t.model_dump(mode="json", by_alias=True) for t in tools]
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def materialize_mcp(
    *,
    name: str,
    id8: str,
    config: Mapping[str, Any],
    credentials: Mapping[str, str],
    tools: Sequence[DiscoveredTool],
    allow: Sequence[str] | None = None,
) -> BuiltinConnectorDefs:
    """The bundle file of an MCP connector: its config (URL, timeout), token env, and discovered tools.
    Raises ConnectorConfigError naming the field (`config.url`, `credentials.x`, `expose.allow`)."""
    checked = {**dict(config), "server_id": id8}
    validate_value(CONFIG_SCHEMA, checked, where="config", error=ConnectorConfigError)
    for field_name, env_name in credentials.items():
        if field_name not in CREDENTIALS:
            raise ConnectorConfigError(
                f"credentials.{field_name}", "connector type mcp has no such secret (known: token)"
            )
        if not isinstance(env_name, str) or not ENV_NAME.match(env_name):
            raise ConnectorConfigError(
                f"credentials.{field_name}",
                "must name an environment variable (letters, digits, underscore); never the token itself",
            )
    chosen = select(tools, id8=id8, allow=allow)
    return BuiltinConnectorDefs(
        name=name,
        type=MCP_TYPE,
        config=apply_defaults(CONFIG_SCHEMA, checked),
        credentials=dict(credentials),
        tools=[
            BuiltinToolSpec(
                name=tool_name(id8, t.name),
                description=t.description,
                inputSchema=t.input_schema,
                sensitive=t.sensitive,
                title=t.title,
                outputSchema=t.output_schema,
                _meta=t.meta,
            )
            for t in chosen
        ],
    )
