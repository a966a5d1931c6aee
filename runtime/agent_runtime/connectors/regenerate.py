"""Recompiling a catalog from a newer document without renaming the tools agents already use."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agent_runtime.connectors.compile import compile_catalog
from agent_runtime.connectors.definitions import ToolDefinitions, ToolSpec
from agent_runtime.connectors.naming import disambiguate


class CatalogChanges(BaseModel):
    """Tool names (as in the regenerated catalog, or the old one for removals)."""

    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


def _identity(spec: ToolSpec) -> str:
    return spec.operation_id or f"{spec.method} {spec.path}"


def _comparable(spec: ToolSpec) -> dict[str, Any]:
    return spec.model_dump(by_alias=True, exclude={"name"})


def regenerate_catalog(
    existing: ToolDefinitions, document: str | Path | Mapping[str, Any]
) -> tuple[ToolDefinitions, CatalogChanges]:
    """Compile `document` under the existing connector name; operations keep their existing tool names."""
    fresh = compile_catalog(document, connector_name=existing.name)
    old_by_identity = {_identity(spec): spec for spec in existing.tools}
    old_by_route = {(spec.method, spec.path): spec for spec in existing.tools}
    fresh_identities = {_identity(spec) for spec in fresh.tools}
    kept_names = {spec.name for spec in existing.tools}
    changes = CatalogChanges()
    taken: set[str] = set()
    matched: set[str] = set()
    matched_old: set[str] = set()
    # Kept operations first, so a new operation can never take a name an existing one holds.
    for spec in fresh.tools:
        old = old_by_identity.get(_identity(spec))
        if old is None:
            # A renamed operationId on the same method and path is the same operation.
            route_match = old_by_route.get((spec.method, spec.path))
            if route_match is not None and _identity(route_match) not in fresh_identities:
                old = route_match
        if old is not None:
            spec.name = old.name
            taken.add(spec.name)
            matched.add(_identity(spec))
            matched_old.add(old.name)
            if _comparable(spec) != _comparable(old):
                changes.changed.append(spec.name)
    for spec in fresh.tools:
        if _identity(spec) in matched:
            continue
        if spec.name in taken or spec.name in kept_names:
            spec.name = disambiguate(spec.name, f"{spec.method} {spec.path}", taken | kept_names)
        taken.add(spec.name)
        changes.added.append(spec.name)
    changes.removed = [spec.name for spec in existing.tools if spec.name not in matched_old]
    return fresh, changes
