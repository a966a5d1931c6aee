"""The AER's HTTP surface (RUNNER_MODE=aer, port 8001): the tool surface agents register.

The agent loop, which will send every tool call through the Orchestration Engine, comes with the OE;
until then the AER serves what it knows: the bundle's connector tools and the tenant's own tools.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.connectors import ToolDefinitions
from agent_runtime.sdk import App
from agent_runtime.servers.auth import ASGIApp
from agent_runtime.servers.component_app import build_component_app
from agent_runtime.servers.health import Readiness
from agent_runtime.servers.metrics import ToolMetrics
from agent_runtime.servers.tool_surface import tool_surface

TOOLS_PATH = "/tools"


def build_aer_app(*, connectors: Sequence[ToolDefinitions], app: App, token: str) -> ASGIApp:
    """The AER app over a loaded bundle and tenant App."""
    surface = tool_surface(connectors=connectors, tenant_tools=list(app.tools.values()))
    metrics = ToolMetrics(component="aer", known_tools=frozenset(entry["name"] for entry in surface))

    async def tools(_: Request) -> Response:
        return JSONResponse({"tools": surface})

    return build_component_app(
        routes=[Route(TOOLS_PATH, tools, methods=["GET"])],
        token=token,
        metrics=metrics,
        readiness=Readiness(),
    )
