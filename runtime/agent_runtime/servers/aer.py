"""The AER's HTTP surface (RUNNER_MODE=aer, port 8001): thin handlers over `ExecutionRunner`.

- `POST /execute` (`AERExecuteRequest`): 202 `{execution_id, state: "running"}` at once, the run goes on as a
  task and ends with `POST /executor/callback` to the OE. 400 names each bad field, 413 over the size cap,
  404 for another workspace than APP_ID, 409 when the execution already runs here.
- `GET /executions/{execution_id}`: 200 `{execution_id, state: "running"}` while this process runs it, else
  404 (the OE's watchdog asks).
- `GET /tools`: every tool with `is_local` and `sensitive`, for the OE's routing and policy, and `model_name`,
  the name a model is shown (`agent_runtime.toolnames`).
- `POST /drain`, `POST /interrupt/call`: stop an execution's turn and local tool bodies, or one local call
  (`servers/drain_http.py`). A drained execution's `POST /execute` is a 409 `execution_draining`.

Answers name the pod (`pod_name`, `pod_address`) so the OE can drain that pod directly (Decision 8).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.connectors import ToolDefinitions
from agent_runtime.connectors.framework import BuiltinConnectorDefs
from agent_runtime.execution_token import StatementVerifier
from agent_runtime.protocol import AER_EXECUTE_PATH, AER_EXECUTION_PATH, AERExecuteRequest, AERExecutionStatus
from agent_runtime.sdk import App, OEApi
from agent_runtime.sdk.tracking import ExecutionDraining
from agent_runtime.servers.auth import STATEMENT_SCOPE_KEY, ASGIApp, StatementGuard, TokenLike
from agent_runtime.servers.bodies import MAX_BODY_BYTES, malformed, read_request_body, too_large
from agent_runtime.servers.component_app import build_component_app
from agent_runtime.servers.drain import DrainSettings, PodIdentity, WorkRegistry
from agent_runtime.servers.drain_http import work_routes
from agent_runtime.servers.executions import ExecutionConflictError, ExecutionRunner, WorkspaceMismatchError
from agent_runtime.servers.health import Readiness
from agent_runtime.servers.metrics import ExecutionMetrics, ToolMetrics
from agent_runtime.servers.thread_http import is_thread_path, thread_routes
from agent_runtime.servers.tool_surface import routed_tool_surface, tool_surface

TOOLS_PATH = "/tools"
# The launcher passes its own; this default matches it for apps built directly (tests).
DEFAULT_SHUTDOWN_TIMEOUT_S = 25.0


def execution_routes(runner: ExecutionRunner, *, pod: PodIdentity | None = None) -> list[Route]:
    """`POST /execute` and `GET /executions/{execution_id}`."""
    pod = pod or PodIdentity()

    def status(execution_id: str) -> dict[str, object]:
        answer = AERExecutionStatus(execution_id=execution_id, pod_name=pod.name, pod_address=pod.address)
        return answer.model_dump(exclude_none=True)

    async def execute(request: Request) -> Response:
        body = await read_request_body(request, limit=MAX_BODY_BYTES)
        if body is None:
            return JSONResponse(too_large(MAX_BODY_BYTES), status_code=413)
        try:
            call = AERExecuteRequest.model_validate_json(body)
        except ValidationError as exc:
            return JSONResponse(malformed(exc), status_code=400)
        claims = request.scope.get(STATEMENT_SCOPE_KEY)
        if claims is not None and claims.execution_id != call.execution_id:
            return JSONResponse(
                {"error": "wrong_execution", "detail": "the OE's statement is for another execution"},
                status_code=403,
            )
        try:
            runner.start(call)
        except WorkspaceMismatchError:
            return JSONResponse({"detail": "this runtime serves another workspace"}, status_code=404)
        except ExecutionConflictError:
            return JSONResponse(
                {"detail": f"execution {call.execution_id!r} is already running here"}, status_code=409
            )
        except ExecutionDraining as exc:
            return JSONResponse({"error": exc.category, "detail": exc.explanation}, status_code=409)
        return JSONResponse(status(call.execution_id), status_code=202)

    async def execution(request: Request) -> Response:
        execution_id = request.path_params["execution_id"]
        if runner.is_running(execution_id):
            return JSONResponse(status(execution_id))
        return JSONResponse({"detail": "this process is not running that execution"}, status_code=404)

    return [
        Route(AER_EXECUTE_PATH, execute, methods=["POST"]),
        Route(AER_EXECUTION_PATH, execution, methods=["GET"]),
    ]


def build_aer_app(
    *,
    connectors: Sequence[ToolDefinitions],
    app: App,
    token: TokenLike,
    oe: OEApi,
    app_id: str | None = None,
    shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
    pod: PodIdentity | None = None,
    drain_settings: DrainSettings | None = None,
    builtins: Sequence[BuiltinConnectorDefs] = (),
    verifier: StatementVerifier | None = None,
) -> ASGIApp:
    """The AER app over a loaded bundle (built-in connectors included) and tenant App; runs report to `oe`."""
    pod = pod or PodIdentity()
    # The execution's life is its turn here: an interrupt waits for a call only while the turn runs.
    work = WorkRegistry(settings=drain_settings, bounded_by_life=True)
    tenant_tools = list(app.tools.values())
    surface = routed_tool_surface(connectors=connectors, tenant_tools=tenant_tools, builtins=builtins)
    metrics = ToolMetrics(component="aer", known_tools=frozenset(entry["name"] for entry in surface))
    runner = ExecutionRunner(
        app=app,
        oe=oe,
        tools=tool_surface(connectors=connectors, tenant_tools=tenant_tools, builtins=builtins),
        metrics=ExecutionMetrics(metrics.registry, component="aer"),
        app_id=app_id,
        work=work,
    )

    async def tools(_: Request) -> Response:
        return JSONResponse({"tools": surface})

    async def shutdown() -> None:
        # uvicorn has stopped taking requests; runs in flight get the shutdown timeout to finish.
        await runner.shutdown(shutdown_timeout_s)
        await oe.aclose()

    return build_component_app(
        routes=[
            *execution_routes(runner, pod=pod),
            Route(TOOLS_PATH, tools, methods=["GET"]),
            *work_routes(work, app_id=app_id, pod=pod),
            *thread_routes(app, app_id=app_id),
        ],
        token=token,
        metrics=metrics,
        readiness=Readiness(),
        on_shutdown=shutdown,
        # With the OE's public key, `POST /execute` opens only to the OE's statement for this AER: tenant
        # code holding the runtime token cannot start runs, nor name another user for one. The token still
        # opens the other routes: they give the AER nothing it does not have.
        guard=None
        if verifier is None
        else lambda asgi: StatementGuard(
            asgi,
            verifier=verifier,
            audience="aer",
            workspace=app_id,
            token=token,
            # The thread routes read the checkpoints (the Tool Pod holds the token, not the store).
            token_opens=lambda path: path != AER_EXECUTE_PATH and not is_thread_path(path),
        ),
    )
