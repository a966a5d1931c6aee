"""Discovery of the built-in connector types (C-02) and their materialization into the bundle.

Every module of the `agent_runtime.connectors.builtin` package (except private ones, `_*.py`) is imported
once; each class it defines that subclasses `BuiltinConnector` and sets `type` is registered under it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping, Sequence
from types import MappingProxyType, ModuleType
from typing import Any

from agent_runtime.connectors.errors import ConnectorError
from agent_runtime.connectors.framework import (
    BuiltinConnector,
    BuiltinConnectorDefs,
    BuiltinToolSpec,
    ConnectorConfigError,
)

PACKAGE = "agent_runtime.connectors.builtin"
# The types a Connector resource names that are not built-in: compiled from an OpenAPI document.
OPENAPI = "openapi"
_registry: Mapping[str, type[BuiltinConnector]] | None = None


def discover(package: str = PACKAGE) -> dict[str, type[BuiltinConnector]]:
    """Import every public module of `package` and collect its connector classes by `type`."""
    root: ModuleType = importlib.import_module(package)
    found: dict[str, type[BuiltinConnector]] = {}
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name == "registry":
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BuiltinConnector)
                and value.__module__ == module.__name__
                and value.type
            ):
                other = found.get(value.type)
                if other is not None and other is not value:
                    raise ConnectorError(
                        f"connector type {value.type!r} is defined twice ({other.__module__} and "
                        f"{value.__module__}); rename one"
                    )
                found[value.type] = value
    return found


def registry(*, refresh: bool = False) -> Mapping[str, type[BuiltinConnector]]:
    """Every registered type, discovered once per process (or again with `refresh`)."""
    global _registry
    if _registry is None or refresh:
        _registry = MappingProxyType(dict(sorted(discover().items())))
    return _registry


def connector_class(type_name: str) -> type[BuiltinConnector]:
    """The class of a registered type; ConnectorConfigError naming `source.type` otherwise."""
    found = registry().get(type_name)
    if found is None:
        known = ", ".join([OPENAPI, *registry()])
        raise ConnectorConfigError("source.type", f"{type_name!r} is not a connector type (known: {known})")
    return found


def connector_types() -> list[dict[str, Any]]:
    """`[{type, description, config_schema, secrets, tools}]` for `GET /connector-types`."""
    return [cls.describe() for cls in registry().values()]


def materialize_builtin(
    *,
    name: str,
    type_name: str,
    config: Mapping[str, Any] | None,
    credentials: Mapping[str, str] | None = None,
    allow: Sequence[str] | None = None,
) -> BuiltinConnectorDefs:
    """The bundle file of a built-in connector: config checked, tools listed and selected by `allow`.

    `allow` holds tool names (`slack.post_message`) or their short form (`post_message`); None or "*"
    selects every tool the configuration offers. Raises ConnectorConfigError naming the field.
    """
    cls = connector_class(type_name)
    if getattr(cls, "discovered_tools", False):
        # Its tools come from the server (connectors.mcp.catalog.materialize_mcp), never from config.
        raise ConnectorConfigError(
            "source.type",
            f"{type_name} connectors list their tools by discovery: declare the server under mcp.servers in "
            "agent.yaml, or as a Connector resource the operator discovers",
        )
    instance = cls(dict(config or {}), name=name, credentials=dict(credentials or {}))
    tools = instance.list_tools()
    if allow is not None and "*" not in allow:
        by_key = {t.name: t for t in tools} | {t.name.split(".", 1)[1]: t for t in tools}
        unknown = [entry for entry in allow if entry not in by_key]
        if unknown:
            raise ConnectorConfigError(
                "expose.allow",
                f"{unknown} name no tool of connector type {type_name} (tools: "
                f"{', '.join(t.name for t in tools)})",
            )
        chosen = {by_key[entry].name for entry in allow}
        tools = [t for t in tools if t.name in chosen]
    return BuiltinConnectorDefs(
        name=name,
        type=type_name,
        config=instance.config,
        credentials=dict(credentials or {}),
        tools=[BuiltinToolSpec.model_validate(t.model_dump(by_alias=True)) for t in tools],
    )


def create_connector(defs: BuiltinConnectorDefs) -> BuiltinConnector:
    """A live connector for a bundle file (the Tool Pod makes one per connector, for its lifetime); a type
    whose tools are discovered gets them from the file (what each declares decides its results' form)."""
    cls = connector_class(defs.type)
    if getattr(cls, "discovered_tools", False):
        return cls(defs.config, name=defs.name, credentials=defs.credentials, tools=defs.tools)
    return cls(defs.config, name=defs.name, credentials=defs.credentials)
