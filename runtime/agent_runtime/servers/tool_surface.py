"""The tools one component knows: bundle connectors (OpenAPI and built-in) plus the tenant's own, under unique
names that can all be shown to one model (`agent_runtime.toolnames`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agent_runtime.connectors import ToolDefinitions
from agent_runtime.connectors.framework import BuiltinConnectorDefs
from agent_runtime.sdk import ToolDefinitionError, ToolSpec
from agent_runtime.toolnames import ToolNameError, ToolNameMap


class DuplicateToolError(ToolDefinitionError):
    """Two tools share a name; agents could not tell them apart."""


def check_unique_tool_names(
    *,
    connectors: Sequence[ToolDefinitions],
    tenant_tools: Iterable[ToolSpec],
    builtins: Sequence[BuiltinConnectorDefs] = (),
) -> None:
    """Raise naming both owners when a tool name appears twice across connectors and tenant tools, or when
    two names would be shown to a model as one (Decision 10)."""
    owners: dict[str, str] = {}
    entries = [(tool.name, f"connector {defs.name!r}") for defs in connectors for tool in defs.tools]
    entries += [(tool.name, f"connector {defs.name!r}") for defs in builtins for tool in defs.tools]
    entries += [(spec.name, "the tenant app") for spec in tenant_tools]
    for name, owner in entries:
        previous = owners.get(name)
        if previous is not None:
            raise DuplicateToolError(
                f"tool {name!r} is defined by both {previous} and {owner}; "
                "rename the tenant tool (name=...) or drop it from one connector's expose.allow"
            )
        owners[name] = owner
    try:
        ToolNameMap.of(owners)
    except ToolNameError as exc:
        raise DuplicateToolError(str(exc)) from None


def tool_surface(
    *,
    connectors: Sequence[ToolDefinitions],
    tenant_tools: Iterable[ToolSpec],
    builtins: Sequence[BuiltinConnectorDefs] = (),
) -> list[dict[str, Any]]:
    """`{name, description, inputSchema}` for every tool, connectors first, in bundle order."""
    specs = list(tenant_tools)
    check_unique_tool_names(connectors=connectors, tenant_tools=specs, builtins=builtins)
    surface = [schema for defs in connectors for schema in defs.tool_schemas()]
    surface += [schema for defs in builtins for schema in defs.tool_schemas()]
    surface += [spec.schema() for spec in specs]
    return surface


# Connector tools whose method only reads are not sensitive; every other method may write (Decision 6).
READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def routed_tool_surface(
    *,
    connectors: Sequence[ToolDefinitions],
    tenant_tools: Iterable[ToolSpec],
    builtins: Sequence[BuiltinConnectorDefs] = (),
) -> list[dict[str, Any]]:
    """`tool_surface` plus `is_local` and `sensitive` per tool, for the OE's routing and policy (B-26), and
    `model_name`, the name a model is shown (dots mapped, Decision 10)."""
    specs = list(tenant_tools)
    check_unique_tool_names(connectors=connectors, tenant_tools=specs, builtins=builtins)
    surface = [
        {**schema, "is_local": False, "sensitive": tool.method not in READ_ONLY_METHODS}
        for defs in connectors
        for tool, schema in zip(defs.tools, defs.tool_schemas(), strict=True)
    ]
    surface += [
        {**schema, "is_local": False, "sensitive": tool.sensitive}
        for defs in builtins
        for tool, schema in zip(defs.tools, defs.tool_schemas(), strict=True)
    ]
    surface += [{**spec.schema(), "is_local": spec.is_local, "sensitive": spec.sensitive} for spec in specs]
    names = ToolNameMap.of(entry["name"] for entry in surface)
    return [{**entry, "model_name": names.model(entry["name"])} for entry in surface]
