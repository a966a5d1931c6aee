"""The Tool Pod's HTTP surface (RUNNER_MODE=tool, port 8002): `POST /execute` and `GET /tools`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.connectors import ToolDefinitions
from agent_runtime.logging_config import log_context
from agent_runtime.sdk import ToolSpec
from agent_runtime.servers.auth import ASGIApp
from agent_runtime.servers.component_app import build_component_app
from agent_runtime.servers.health import Readiness
from agent_runtime.servers.metrics import ToolMetrics
from agent_runtime.servers.tool_calls import ExecuteRequest, ToolCallService, validation_problems
from agent_runtime.servers.tool_surface import tool_surface

EXECUTE_PATH = "/execute"
TOOLS_PATH = "/tools"


def build_tool_app(
    *,
    connectors: Sequence[ToolDefinitions],
    tenant_tools: Sequence[ToolSpec],
    secret_env: Mapping[str, str],
    token: str,
) -> ASGIApp:
    """The Tool Pod app; executors are created now and closed when the server shuts down."""
    remote_tools = [spec for spec in tenant_tools if not spec.is_local]
    surface = tool_surface(connectors=connectors, tenant_tools=remote_tools)
    metrics = ToolMetrics(component="tool", known_tools=frozenset(entry["name"] for entry in surface))
    service = ToolCallService(
        connectors=connectors, tenant_tools=remote_tools, secret_env=secret_env, metrics=metrics
    )

    async def execute(request: Request) -> Response:
        try:
            call = ExecuteRequest.model_validate_json(await request.body())
        except ValidationError as exc:
            return JSONResponse({"detail": validation_problems(exc)}, status_code=422)
        with log_context(execution_id=call.execution_id, step=call.step):
            outcome = await service.execute(call)
        return Response(outcome.model_dump_json(), media_type="application/json")

    async def tools(_: Request) -> Response:
        return JSONResponse({"tools": surface})

    return build_component_app(
        routes=[Route(EXECUTE_PATH, execute, methods=["POST"]), Route(TOOLS_PATH, tools, methods=["GET"])],
        token=token,
        metrics=metrics,
        readiness=Readiness(),
        on_shutdown=service.aclose,
    )
