"""The Orchestration Engine's HTTP surface (RUNNER_MODE=oe, port 8080): thin handlers over `Orchestrator`.

Two audiences, two credentials: clients (invoke, read, cancel, resume) present the OE's client token;
runtimes (`/tool/execute`, `/tool/result`, `/executor/callback`) present their Agent's runtime token,
which also says which Agent is calling, so an Agent only ever reaches its own executions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agent_runtime.contract import METRICS_PATH
from agent_runtime.oe.engine import (
    BadReview,
    Conflict,
    NotFound,
    Orchestrator,
    UnknownAgent,
    client_view,
    review_view,
)
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.reviews import MAX_RESUME_BODY_BYTES, ReviewBodyError, flat_review, wrapped_review
from agent_runtime.protocol import (
    OE_CALLBACK_PATH,
    OE_TOOL_EXECUTE_PATH,
    OE_TOOL_RESULT_PATH,
    ExecutionState,
    ExecutorCallback,
    InvokeRequest,
    ToolExecuteRequest,
    ToolResultRequest,
)
from agent_runtime.servers.connector_types import CONNECTOR_TYPES_PATH, list_connector_types
from agent_runtime.servers.health import Readiness, health_routes
from agent_runtime.servers.oe_drains import drain_routes
from agent_runtime.servers.oe_metrics import OEMetrics
from agent_runtime.token_file import RotatingToken, TokenLike, as_rotating, grace_from_env

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024
M = TypeVar("M", bound=BaseModel)
Background = Callable[[], Awaitable[None]]


class RuntimeTokens(Protocol):
    def by_token(self, token: str) -> AgentRegistration | None: ...


class HTTPError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body)
        self.status = status
        self.body = body


def _problems(exc: ValidationError) -> list[dict[str, str]]:
    """Pydantic errors as {field, problem}, without the offending input (it may be a secret)."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        field = ".".join(str(part) for part in error["loc"]) or "(body)"
        problems.append({"field": field, "problem": error["msg"]})
    return problems


async def _body(request: Request, *, limit: int = MAX_BODY_BYTES, what: str = "") -> bytes:
    too_large = HTTPError(
        413, {"detail": [{"field": "(body)", "problem": f"larger than {limit} bytes{what}"}]}
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def _resume_body(request: Request) -> Any:
    raw = await _body(
        request,
        limit=MAX_RESUME_BODY_BYTES,
        what="; a resume body is a decision, optional notes and optional edited arguments",
    )
    try:
        return json.loads(raw)
    except ValueError:
        raise HTTPError(
            400, {"detail": [{"field": "(body)", "problem": "not JSON; send a JSON object with a decision"}]}
        ) from None


async def _parse(request: Request, model: type[M]) -> M:
    raw = await _body(request)
    try:
        return model.model_validate_json(raw or b"null")
    except ValidationError as exc:
        raise HTTPError(400, {"detail": _problems(exc)}) from None


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    return credentials.strip()


_UNAUTHORIZED = Response(status_code=401, headers={"www-authenticate": "Bearer"})


def build_oe_app(
    *,
    engine: Orchestrator,
    registry: RuntimeTokens,
    client_token: TokenLike,
    background: Sequence[Background] = (),
    on_startup: Sequence[Background] = (),
    on_shutdown: Sequence[Background] = (),
) -> Starlette:
    """The OE app; `background` loops (registrations, watchdog) run for the server's life."""
    readiness = Readiness()
    metrics = OEMetrics()
    # Read again when its file changes; the previous one stays accepted for a grace period.
    client_tokens = as_rotating(client_token)

    def client_guard(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            token = _bearer(request)
            if token is None or not client_tokens.accepts(token.encode("utf-8")):
                return _UNAUTHORIZED
            return await _answer(handler, request)

        return guarded

    def runtime_guard(
        handler: Callable[[Request, AgentRegistration], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            token = _bearer(request)
            caller = registry.by_token(token) if token is not None else None
            if caller is None:
                return _UNAUTHORIZED
            return await _answer(lambda r: handler(r, caller), request)

        return guarded

    async def _answer(handler: Callable[[Request], Awaitable[Response]], request: Request) -> Response:
        try:
            return await handler(request)
        except HTTPError as exc:
            return JSONResponse(exc.body, status_code=exc.status)
        except NotFound as exc:
            return JSONResponse({"error": "execution_not_found", "detail": str(exc)}, status_code=404)
        except (ReviewBodyError, BadReview) as exc:
            problems = (
                exc.problems
                if isinstance(exc, ReviewBodyError)
                else [{"field": exc.field, "problem": exc.problem}]
            )
            return JSONResponse({"detail": problems}, status_code=400)
        except UnknownAgent as exc:
            return JSONResponse({"error": "agent_not_found", "detail": str(exc)}, status_code=404)
        except Conflict as exc:
            return JSONResponse({"error": exc.code, "detail": str(exc)}, status_code=409)

    # client API -----------------------------------------------------------------------------------------

    async def invoke(request: Request) -> Response:
        body = await _parse(request, InvokeRequest)
        record = await engine.invoke(body)
        metrics.execution_created()
        return JSONResponse(
            {"execution_id": record.execution_id, "status": record.status.value}, status_code=202
        )

    async def get_execution(request: Request) -> Response:
        record = await engine.get(request.path_params["execution_id"])
        return JSONResponse(client_view(record))

    async def list_executions(request: Request) -> Response:
        query = request.query_params
        status = query.get("status")
        try:
            state = ExecutionState(status) if status else None
            limit = int(query.get("limit", "50"))
        except ValueError:
            raise HTTPError(
                400,
                {
                    "detail": [
                        {"field": "status/limit", "problem": "status must be a state name, limit a number"}
                    ]
                },
            ) from None
        if not 1 <= limit <= 500:
            raise HTTPError(400, {"detail": [{"field": "limit", "problem": "must be between 1 and 500"}]})
        page = await engine.store.list_executions(
            agent=query.get("agent") or None,
            project_id=query.get("project") or None,
            status=state,
            limit=limit,
            cursor=query.get("cursor") or None,
        )
        return JSONResponse(
            {"items": [client_view(item) for item in page.items], "next_cursor": page.next_cursor}
        )

    async def audit(request: Request) -> Response:
        record = await engine.get(request.path_params["execution_id"])
        records = await engine.store.list_audit(record.execution_id)
        return JSONResponse({"records": [entry.model_dump(mode="json") for entry in records]})

    async def events(request: Request) -> Response:
        record = await engine.get(request.path_params["execution_id"])
        raw_after = request.query_params.get("after") or request.headers.get("last-event-id") or "0"
        after = int(raw_after) if raw_after.isdigit() else 0

        async def stream() -> AsyncIterator[bytes]:
            async for event in engine.events.follow(record.execution_id, after_seq=after):
                if event is None:
                    yield b": keep-alive\n\n"
                    continue
                payload = json.dumps(event.model_dump(mode="json"), separators=(",", ":"))
                yield f"id: {event.seq}\nevent: {event.type}\ndata: {payload}\n\n".encode()

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )

    async def cancel(request: Request) -> Response:
        record = await engine.cancel(request.path_params["execution_id"])
        return JSONResponse(client_view(record))

    async def resume_internal(request: Request) -> Response:
        review = wrapped_review(await _resume_body(request))
        record = await engine.resume(request.path_params["execution_id"], review)
        return JSONResponse(client_view(record), status_code=202)

    async def resume_gateway(request: Request) -> Response:
        review = flat_review(await _resume_body(request))
        record = await engine.resume(
            request.path_params["execution_id"], review, project_id=request.path_params["project_id"]
        )
        return JSONResponse(client_view(record), status_code=202)

    async def reviews(request: Request) -> Response:
        query = request.query_params
        raw_limit = query.get("limit", "50")
        if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= 500:
            raise HTTPError(
                400, {"detail": [{"field": "limit", "problem": "must be a number from 1 to 500"}]}
            )
        try:
            items, next_cursor = await engine.pending_reviews(
                request.path_params["project_id"], limit=int(raw_limit), cursor=query.get("cursor") or None
            )
        except ValueError:
            raise HTTPError(
                400, {"detail": [{"field": "cursor", "problem": "not a cursor this list returned"}]}
            ) from None
        return JSONResponse({"items": [review_view(item) for item in items], "next_cursor": next_cursor})

    # runtime API ----------------------------------------------------------------------------------------

    async def tool_execute(request: Request, caller: AgentRegistration) -> Response:
        call = await _parse(request, ToolExecuteRequest)
        answer = await engine.tool_execute(caller, call)
        metrics.step(
            decision="deny" if not answer.proceed else (answer.status or "callback"), cached=answer.from_cache
        )
        return Response(answer.model_dump_json(), media_type="application/json")

    async def tool_result(request: Request, caller: AgentRegistration) -> Response:
        report = await _parse(request, ToolResultRequest)
        await engine.tool_result(caller, report)
        return JSONResponse({"accepted": True})

    async def callback(request: Request, caller: AgentRegistration) -> Response:
        report = await _parse(request, ExecutorCallback)
        record = await engine.callback(caller, report)
        metrics.execution_finished(record.status.value)
        return JSONResponse({"accepted": True, "status": record.status.value})

    async def metrics_endpoint(_: Request) -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    routes = [
        Route("/invoke", client_guard(invoke), methods=["POST"]),
        Route(CONNECTOR_TYPES_PATH, client_guard(list_connector_types), methods=["GET"]),
        Route("/executions", client_guard(list_executions), methods=["GET"]),
        Route("/execution/{execution_id}", client_guard(get_execution), methods=["GET"]),
        Route("/execution/{execution_id}/audit", client_guard(audit), methods=["GET"]),
        Route("/execution/{execution_id}/events", client_guard(events), methods=["GET"]),
        Route("/execution/{execution_id}/cancel", client_guard(cancel), methods=["POST"]),
        *drain_routes(engine, client_guard),
        Route("/resume/{execution_id}", client_guard(resume_internal), methods=["POST"]),
        Route(
            "/api/v1/projects/{project_id}/executions/{execution_id}/resume",
            client_guard(resume_gateway),
            methods=["POST"],
        ),
        Route("/api/v1/projects/{project_id}/reviews", client_guard(reviews), methods=["GET"]),
        Route(OE_TOOL_EXECUTE_PATH, runtime_guard(tool_execute), methods=["POST"]),
        Route(OE_TOOL_RESULT_PATH, runtime_guard(tool_result), methods=["POST"]),
        Route(OE_CALLBACK_PATH, runtime_guard(callback), methods=["POST"]),
        *health_routes(readiness),
        Route(METRICS_PATH, metrics_endpoint, methods=["GET"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await engine.store.open()
        for hook in on_startup:
            await hook()
        await engine.recover()
        loops = [asyncio.create_task(_forever(work)) for work in background]
        readiness.mark_ready()
        try:
            yield
        finally:
            readiness.mark_shutting_down()
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            await engine.aclose()
            await engine.runtimes.aclose()
            for hook in on_shutdown:
                await hook()
            await engine.store.close()

    return Starlette(routes=routes, lifespan=lifespan)


async def _forever(work: Background) -> None:
    """Run a background loop; an unexpected error is logged and the loop restarted, never lost silently."""
    while True:
        try:
            await work()
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.error(
                "background task %s failed: %s",
                getattr(work, "__name__", work),
                type(exc).__name__,
                exc_info=exc,
            )
            await asyncio.sleep(1.0)


def build_oe_from_env(env: Mapping[str, str]) -> Starlette:
    """The OE as `RUNNER_MODE=oe` runs it: settings, store, registrations and the watchdog from env."""
    from agent_runtime.oe.drains import DrainCallerSettings
    from agent_runtime.oe.registry import Registry
    from agent_runtime.oe.registry import from_env as registrations_from_env
    from agent_runtime.oe.runtimes import Runtimes
    from agent_runtime.oe.settings import CLIENT_TOKEN_FILE_ENV, CLIENT_TOKEN_GRACE_ENV, OESettings
    from agent_runtime.oe.store import open_store

    settings = OESettings.from_env(env)
    store = open_store(
        store_type=settings.store_type,
        sqlite_path=settings.sqlite_path,
        mongodb_uri=settings.mongodb_uri,
        mongodb_database=settings.mongodb_database,
    )
    # An Agent's previous runtime token stays accepted for RUNTIME_TOKEN_GRACE_S after its registration
    # changed: its pods read the rotated Secret each at their own pace.
    source = registrations_from_env(env, registry=Registry(grace_s=grace_from_env(env)))
    client_file = env.get(CLIENT_TOKEN_FILE_ENV, "").strip()
    client_token = RotatingToken(
        settings.client_token,
        path=client_file or None,
        setting=CLIENT_TOKEN_FILE_ENV,
        what="client token",
        grace_s=grace_from_env(env, CLIENT_TOKEN_GRACE_ENV),
    )
    engine = Orchestrator(
        store=store,
        registry=source.registry,
        runtimes=Runtimes(tool_pod_connect_retry_s=settings.tool_pod_retry_s),
        aer_lost_after_s=settings.aer_lost_after_s,
        run_restarts=settings.run_restarts,
        drain_settings=DrainCallerSettings.from_env(env),
    )

    async def watchdog() -> None:
        while True:
            await asyncio.sleep(settings.watchdog_interval_s)
            await engine.watchdog_once()

    return build_oe_app(
        engine=engine,
        registry=source.registry,
        client_token=client_token,
        background=[source.run, watchdog, engine.drains.run],
        on_startup=[source.refresh],
    )
