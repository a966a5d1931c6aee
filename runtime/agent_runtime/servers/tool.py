"""The Tool Pod's HTTP surface (RUNNER_MODE=tool, port 8002): `POST /execute` and `GET /tools`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.connectors import ToolDefinitions
from agent_runtime.logging_config import log_context
from agent_runtime.sdk import ToolSpec
from agent_runtime.servers.auth import ASGIApp, Receive, Scope, Send
from agent_runtime.servers.component_app import build_component_app
from agent_runtime.servers.health import Readiness
from agent_runtime.servers.metrics import ToolMetrics
from agent_runtime.servers.tool_calls import (
    ExecuteRequest,
    ExecuteResponse,
    ToolCallService,
    validation_problems,
)
from agent_runtime.servers.tool_surface import tool_surface

EXECUTE_PATH = "/execute"
TOOLS_PATH = "/tools"
# Tool arguments are JSON for an API call; anything larger is a mistake or an attack.
MAX_EXECUTE_BODY_BYTES = 8 * 1024 * 1024

_JSON_HEADERS = (b"content-type", b"application/json")
_response_json = ExecuteResponse.__pydantic_serializer__.to_json


class ExecuteEndpoint:
    """`POST /execute` as plain ASGI: no router, request or response objects on the hot path."""

    def __init__(self, app: ASGIApp, *, service: ToolCallService) -> None:
        self._app = app
        self._service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != EXECUTE_PATH:
            await self._app(scope, receive, send)
            return
        if scope["method"] != "POST":
            await _send_json(send, 405, b'{"detail":"use POST"}', extra=[(b"allow", b"POST")])
            return
        body = await _read_body(receive, limit=MAX_EXECUTE_BODY_BYTES)
        if body is None:
            detail = {
                "detail": [{"field": "(body)", "problem": f"larger than {MAX_EXECUTE_BODY_BYTES} bytes"}]
            }
            await _send_json(send, 413, json.dumps(detail).encode())
            return
        try:
            call = ExecuteRequest.model_validate_json(body)
        except ValidationError as exc:
            await _send_json(send, 422, json.dumps({"detail": validation_problems(exc)}).encode())
            return
        with log_context(execution_id=call.execution_id, step=call.step):
            outcome = await self._service.execute(call)
        await _send_json(send, 200, _response_json(outcome))


async def _read_body(receive: Receive, *, limit: int) -> bytes | None:
    """The whole request body, or None once it exceeds `limit`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _send_json(
    send: Send, status: int, payload: bytes, *, extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    headers = [_JSON_HEADERS, (b"content-length", str(len(payload)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


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

    async def tools(_: Request) -> Response:
        return JSONResponse({"tools": surface})

    return build_component_app(
        routes=[Route(TOOLS_PATH, tools, methods=["GET"])],
        token=token,
        metrics=metrics,
        readiness=Readiness(),
        on_shutdown=service.aclose,
        fast_path=lambda app: ExecuteEndpoint(app, service=service),
    )
