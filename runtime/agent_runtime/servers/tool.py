"""The Tool Pod's HTTP surface (port 8002): `POST /execute`, `POST /invoke_llm`, and `GET /tools`.

Both calls answer 200 with a `CallOutcome` (`status` success, error or suspend, `pod_name`), 413 over the body
cap and 422 naming each bad field of a malformed body. `POST /drain` and `POST /interrupt/call` stop an
execution's calls, or one of them (`servers/drain_http.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.connectors import ToolDefinitions
from agent_runtime.connectors.framework import BuiltinConnectorDefs
from agent_runtime.execution_token import Claims, StatementVerifier
from agent_runtime.logging_config import log_context
from agent_runtime.protocol import INVOKE_LLM_PATH, TOOL_EXECUTE_PATH, CallOutcome, InvokeLLMRequest
from agent_runtime.sdk import App
from agent_runtime.servers import connector_test
from agent_runtime.servers.auth import (
    STATEMENT_SCOPE_KEY,
    ASGIApp,
    Receive,
    Scope,
    Send,
    StatementGuard,
    TokenLike,
)
from agent_runtime.servers.bodies import (
    MAX_BODY_BYTES,
    dumps,
    malformed,
    read_asgi_body,
    read_request_body,
    too_large,
)
from agent_runtime.servers.component_app import build_component_app
from agent_runtime.servers.drain import DrainSettings, PodIdentity, WorkRegistry
from agent_runtime.servers.drain_http import work_routes
from agent_runtime.servers.health import Readiness
from agent_runtime.servers.llm_calls import LLMCallService, construction_context
from agent_runtime.servers.llm_stream_route import NDJSON, streamed_llm_call
from agent_runtime.servers.metrics import LLMMetrics, ToolMetrics
from agent_runtime.servers.model_spans import traced_model_call
from agent_runtime.servers.recent_calls import RecentCalls
from agent_runtime.servers.tenant_workers import TenantWorkers
from agent_runtime.servers.tool_calls import ExecuteRequest, ToolCallService
from agent_runtime.servers.tool_surface import tool_surface

EXECUTE_PATH = TOOL_EXECUTE_PATH
TOOLS_PATH = "/tools"
MAX_EXECUTE_BODY_BYTES = MAX_BODY_BYTES

_JSON_HEADERS = (b"content-type", b"application/json")
_response_json = CallOutcome.__pydantic_serializer__.to_json


class ExecuteEndpoint:
    """`POST /execute` as plain ASGI: no router, request or response objects on the hot path."""

    def __init__(self, app: ASGIApp, *, service: ToolCallService, recent: RecentCalls | None = None) -> None:
        self._app = app
        self._service = service
        self._recent = recent or RecentCalls()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != EXECUTE_PATH:
            await self._app(scope, receive, send)
            return
        if scope["method"] != "POST":
            await _send_json(send, 405, b'{"detail":"use POST"}', extra=[(b"allow", b"POST")])
            return
        body = await read_asgi_body(receive, limit=MAX_EXECUTE_BODY_BYTES)
        if body is None:
            await _send_json(send, 413, dumps(too_large(MAX_EXECUTE_BODY_BYTES)))
            return
        try:
            call = ExecuteRequest.model_validate_json(body)
        except ValidationError as exc:
            await _send_json(send, 422, dumps(malformed(exc)))
            return
        refused = _other_execution(scope.get(STATEMENT_SCOPE_KEY), call.execution_id)
        if refused is not None:
            await _send_json(send, 403, refused)
            return
        with log_context(execution_id=call.execution_id, step=call.step):
            outcome = await self._recent.once(
                route=EXECUTE_PATH,
                execution_id=call.execution_id,
                step=call.step,
                # The call, not its credential: an OE that restarted signs the run a new memory statement,
                # and a resent call must still be recognised as the same call (no side effect twice).
                body=call.model_dump_json(exclude={"memory_credential"}).encode(),
                run=lambda: self._service.execute(call),
            )
        await _send_json(send, 200, _response_json(outcome))


def _other_execution(claims: Claims | None, execution_id: str | None) -> bytes | None:
    """A statement for one execution opens that execution's calls only (None: allowed)."""
    if claims is None or claims.execution_id == (execution_id or ""):
        return None
    return dumps(
        {"error": "wrong_execution", "detail": "the OE's statement is for another execution than the body's"}
    )


async def _send_json(
    send: Send, status: int, payload: bytes, *, extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    headers = [_JSON_HEADERS, (b"content-length", str(len(payload)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def invoke_llm_route(service: LLMCallService, *, recent: RecentCalls | None = None) -> Route:
    """`POST /invoke_llm`: run a registered model once (B-12); once per (execution, step) with `recent`."""
    memory = recent or RecentCalls()

    async def invoke_llm(request: Request) -> Response:
        body = await read_request_body(request, limit=MAX_BODY_BYTES)
        if body is None:
            return JSONResponse(too_large(MAX_BODY_BYTES), status_code=413)
        try:
            call = InvokeLLMRequest.model_validate_json(body)
        except ValidationError as exc:
            return JSONResponse(malformed(exc), status_code=422)
        refused = _other_execution(request.scope.get(STATEMENT_SCOPE_KEY), call.execution_id)
        if refused is not None:
            return Response(refused, status_code=403, media_type="application/json")
        if call.stream and NDJSON in request.headers.get("accept", ""):
            return streamed_llm_call(service, call, body=body, recent=memory)
        with log_context(execution_id=call.execution_id, step=call.step):
            outcome = await memory.once(
                route=INVOKE_LLM_PATH,
                execution_id=call.execution_id,
                step=call.step,
                body=body,
                run=lambda: traced_model_call(call, lambda: service.invoke(call)),
            )
        return Response(_response_json(outcome), media_type="application/json")

    return Route(INVOKE_LLM_PATH, invoke_llm, methods=["POST"])


def build_tool_app(
    *,
    connectors: Sequence[ToolDefinitions],
    app: App | None,
    secret_env: Mapping[str, str],
    token: TokenLike,
    pod_name: str | None = None,
    app_id: str | None = None,
    pod_address: str | None = None,
    drain_settings: DrainSettings | None = None,
    builtins: Sequence[BuiltinConnectorDefs] = (),
    verifier: StatementVerifier | None = None,
    tenant_entrypoint: str | None = None,
) -> ASGIApp:
    """The Tool Pod app: executors (and built-in connectors) made now and closed at shutdown; the entrypoint
    built at start-up. With `tenant_entrypoint` (the launcher passes AGENT_ENTRYPOINT) each tenant tool
    body runs in a worker process holding only its declared secrets (servers/tenant_workers.py); without
    it (an App built in this process, tests and embedding), in this process."""
    tenant_tools = list(app.tools.values()) if app is not None else []
    remote_tools = [spec for spec in tenant_tools if not spec.is_local]
    surface = tool_surface(connectors=connectors, tenant_tools=remote_tools, builtins=builtins)
    metrics = ToolMetrics(component="tool", known_tools=frozenset(entry["name"] for entry in surface))
    # Every tool and model call of an execution, for POST /drain and POST /interrupt/call.
    work = WorkRegistry(settings=drain_settings)
    workers = (
        TenantWorkers(entrypoint=tenant_entrypoint, tools=remote_tools, secret_env=secret_env)
        if tenant_entrypoint and remote_tools
        else None
    )
    service = ToolCallService(
        connectors=connectors,
        tenant_tools=remote_tools,
        secret_env=secret_env,
        metrics=metrics,
        pod_name=pod_name,
        pod_address=pod_address,
        work=work,
        builtins=builtins,
        workers=workers,
    )
    # The entrypoint is built with every tool the agent may offer a model, local ones included.
    context = construction_context(
        tools=tool_surface(connectors=connectors, tenant_tools=tenant_tools, builtins=builtins),
        workspace_id=app_id or "",
    )
    llm_calls = LLMCallService(
        app=app,
        context=context,
        metrics=LLMMetrics(metrics.registry, component="tool"),
        secret_values=[value for value in secret_env.values() if value],
        pod_name=pod_name,
        pod_address=pod_address,
        work=work,
    )
    controls = work_routes(work, app_id=app_id, pod=PodIdentity(name=pod_name, address=pod_address))

    async def tools(_: Request) -> Response:
        return JSONResponse({"tools": surface})

    # One memory for both routes: an OE that re-drives a step gets the outcome of the call it already sent.
    recent = RecentCalls()

    async def construct() -> None:
        await service.start()
        await llm_calls.construct()

    return build_component_app(
        routes=[
            Route(TOOLS_PATH, tools, methods=["GET"]),
            invoke_llm_route(llm_calls, recent=recent),
            connector_test.tool_pod_route(service),
            *controls,
        ],
        token=token,
        metrics=metrics,
        readiness=Readiness(),
        on_startup=construct,
        on_shutdown=service.aclose,
        fast_path=lambda asgi: ExecuteEndpoint(asgi, service=service, recent=recent),
        # With the OE's public key, only the OE's statements open the Tool Pod: not the runtime token the
        # AER holds (issue 27). Without it (apps built directly, local runs) the token guard of old.
        guard=None
        if verifier is None
        else lambda asgi: StatementGuard(asgi, verifier=verifier, audience="tool", workspace=app_id),
    )
