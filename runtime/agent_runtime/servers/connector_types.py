"""`GET /connector-types` on the OE (C-02): every registered built-in connector type with its config schema,
its secrets (names only) and its tools, read from the registry, so a new type shows up with no change here."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agent_runtime.connectors.builtin.registry import OPENAPI, connector_types

CONNECTOR_TYPES_PATH = "/connector-types"


async def list_connector_types(_: Request) -> Response:
    """`{types: [{type, description, config_schema, secrets, tools}], other_sources: ["openapi"]}`."""
    return JSONResponse({"types": connector_types(), "other_sources": [OPENAPI]})
