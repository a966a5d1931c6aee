"""A connector for the loopback echo provider, built through the public authoring path."""

from __future__ import annotations

from typing import Any

from agent_runtime.connectors import ToolDefinitions, ToolYaml, compile_catalog, materialize_connector

_Q = {"in": "query", "schema": {"type": "string"}}


def _get(op_id: str, *params: dict[str, Any]) -> dict[str, Any]:
    return {"operationId": op_id, "parameters": list(params)}


PROVIDER_DOCUMENT: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "echo provider", "version": "1"},
    "components": {"securitySchemes": {"token": {"type": "http", "scheme": "bearer"}}},
    "security": [{"token": []}],
    "paths": {
        "/echo/items/{itemId}": {
            "get": _get(
                "getItem",
                {"name": "itemId", "in": "path", "required": True, "schema": {"type": "string"}},
                {
                    "name": "filter",
                    "in": "query",
                    "style": "deepObject",
                    "explode": True,
                    "schema": {"type": "object"},
                },
                {"name": "tags", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
            ),
        },
        "/echo/items": {
            "post": {
                "operationId": "createItem",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["title"],
                                "properties": {"title": {"type": "string"}, "extra": {"type": "object"}},
                            }
                        }
                    },
                },
            }
        },
        "/echo/documents": {
            "put": {
                "operationId": "putDocument",
                "requestBody": {
                    "content": {
                        "application/json": {"schema": {"type": "array", "items": {"type": "object"}}}
                    }
                },
            }
        },
        "/redirect": {
            "get": _get("redirectGet", {"name": "to", **_Q}, {"name": "status", **_Q}),
            "post": _get("redirectPost", {"name": "to", **_Q}, {"name": "status", **_Q}),
        },
        "/flaky/{key}": {
            "get": _get(
                "flakyGet",
                {"name": "key", "in": "path", "required": True, "schema": {"type": "string"}},
                {"name": "fail", **_Q},
                {"name": "status", **_Q},
                {"name": "retry_after", **_Q},
            ),
            "post": _get(
                "flakyPost",
                {"name": "key", "in": "path", "required": True, "schema": {"type": "string"}},
                {"name": "fail", **_Q},
                {"name": "status", **_Q},
            ),
        },
        "/leak/{code}": {
            "get": _get(
                "leak", {"name": "code", "in": "path", "required": True, "schema": {"type": "integer"}}
            )
        },
        "/status/{code}": {
            "get": _get(
                "status",
                {"name": "code", "in": "path", "required": True, "schema": {"type": "integer"}},
                {"name": "body", **_Q},
                {"name": "content_type", **_Q},
            )
        },
        "/slow": {"get": _get("slow", {"name": "delay", **_Q}, {"name": "chunks", **_Q})},
        "/stall": {"get": _get("stall", {"name": "delay", **_Q})},
        "/endless": {"get": _get("endless")},
        "/loop": {"get": _get("loop")},
        "/garbled": {"get": _get("garbled")},
        "/big": {"get": _get("big", {"name": "size", **_Q}, {"name": "type", **_Q})},
    },
}


def provider_connector(base_url: str, *, auth: dict[str, Any] | None = None) -> ToolDefinitions:
    catalog = compile_catalog(PROVIDER_DOCUMENT, connector_name="echo")
    tool = ToolYaml(
        name="echo",
        source={"base_url": base_url},
        expose={"allow": ["*"]},
        auth=auth if auth is not None else {"type": "bearer", "env": "ECHO_TOKEN"},
    )
    return materialize_connector(tool, catalog)
