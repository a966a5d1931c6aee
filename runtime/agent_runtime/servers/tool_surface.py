"""The tools one component knows: bundle connectors plus the tenant's own, under unique names."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agent_runtime.connectors import ToolDefinitions
from agent_runtime.sdk import ToolDefinitionError, ToolSpec


class DuplicateToolError(ToolDefinitionError):
    """Two tools share a name; agents could not tell them apart."""


def check_unique_tool_names(
    *, connectors: Sequence[ToolDefinitions], tenant_tools: Iterable[ToolSpec]
) -> None:
    """Raise naming both owners when a tool name appears twice across connectors and tenant tools."""
    owners: dict[str, str] = {}
    entries = [(tool.name, f"connector {defs.name!r}") for defs in connectors for tool in defs.tools]
    entries += [(spec.name, "the tenant app") for spec in tenant_tools]
    for name, owner in entries:
        previous = owners.get(name)
        if previous is not None:
            raise DuplicateToolError(
                f"tool {name!r} is defined by both {previous} and {owner}; "
                "rename the tenant tool (name=...) or drop it from one connector's expose.allow"
            )
        owners[name] = owner


def tool_surface(
    *, connectors: Sequence[ToolDefinitions], tenant_tools: Iterable[ToolSpec]
) -> list[dict[str, Any]]:
    """`{name, description, inputSchema}` for every tool, connectors first, in bundle order."""
    specs = list(tenant_tools)
    check_unique_tool_names(connectors=connectors, tenant_tools=specs)
    surface = [schema for defs in connectors for schema in defs.tool_schemas()]
    surface += [spec.schema() for spec in specs]
    return surface


# Connector tools whose method only reads are not sensitive; every other method may write (Decision 6).
READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def routed_tool_surface(
    *, connectors: Sequence[ToolDefinitions], tenant_tools: Iterable[ToolSpec]
) -> list[dict[str, Any]]:
    """`tool_surface` plus `is_local` and `sensitive` per tool, for the OE's routing and policy (B-26)."""
    specs = list(tenant_tools)
    check_unique_tool_names(connectors=connectors, tenant_tools=specs)
    surface = [
        {**schema, "is_local": False, "sensitive": tool.method not in READ_ONLY_METHODS}
        for defs in connectors
        for tool, schema in zip(defs.tools, defs.tool_schemas(), strict=True)
    ]
    surface += [{**spec.schema(), "is_local": spec.is_local, "sensitive": spec.sensitive} for spec in specs]
    return surface
