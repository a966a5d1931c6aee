"""The agreed public names exist and fit together end to end on a small document."""

from __future__ import annotations

import agent_runtime.connectors as connectors
from agent_runtime.connectors import (
    build_bundle,
    compile_catalog,
    materialize_connector,
    scaffold_tool_yaml,
)

PETS = {
    "openapi": "3.0.3",
    "info": {"title": "pets", "version": "1"},
    "servers": [{"url": "https://pets.invalid/v1"}],
    "components": {"securitySchemes": {"token": {"type": "http", "scheme": "bearer"}}},
    "security": [{"token": []}],
    "paths": {
        "/pets/{petId}": {
            "get": {
                "operationId": "getPet",
                "summary": "Get a pet",
                "parameters": [
                    {"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
            }
        }
    },
}


def test_public_names_are_exported() -> None:
    expected = {
        "ToolDefinitions",
        "load_tool_defs",
        "compile_catalog",
        "load_catalog_text",
        "ToolYaml",
        "scaffold_tool_yaml",
        "regenerate_catalog",
        "materialize_connector",
        "ConnectorError",
        "Bundle",
        "build_bundle",
        "write_bundle",
        "BUNDLE_INDEX",
        "resolve_runtime_bundle",
        "RuntimeBundle",
        "ConnectorExecutor",
        "ToolResponse",
        "ToolArgumentError",
        "UnknownToolError",
        "classify_tool_api_error",
        "ToolApiError",
        "CatalogChanges",
    }
    assert expected <= set(connectors.__all__)


def test_compile_scaffold_materialize_bundle() -> None:
    catalog = compile_catalog(PETS, connector_name="pets")
    tool = scaffold_tool_yaml(catalog)
    connector = materialize_connector(tool, catalog)
    bundle = build_bundle([connector])

    assert [t.name for t in connector.tools] == ["pets_getPet"]
    assert connector.source.base_url == "https://pets.invalid/v1"
    assert connector.auth is not None and connector.auth.env == "PETS_TOKEN"
    assert bundle.tool_count == 1
    assert set(bundle.files) == {"index.yaml", "pets.yaml"}
    assert build_bundle([connector]).digest == bundle.digest
