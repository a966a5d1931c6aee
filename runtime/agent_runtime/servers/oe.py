"""The Orchestration Engine's HTTP surface (RUNNER_MODE=oe, port 8080): thin handlers over `Orchestrator`.

Two audiences, two credentials: clients (invoke, read, cancel, resume) present a token the cluster's API
server accepts (checked with a TokenReview, then a SubjectAccessReview per namespace: `oe/client_auth.py`),
or the static development token where no cluster exists; runtimes (`/tool/execute`, `/tool/result`,
`/executor/callback`) present their Agent's runtime token, which also says which Agent is calling, so an
Agent only ever reaches its own executions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agent_runtime.console.app import console_enabled, console_oidc, mount_console
from agent_runtime.console.oidc import OIDCSettings
from agent_runtime.contract import METRICS_PATH
from agent_runtime.execution_log import ExecutionLog
from agent_runtime.listen import json_edge_problem
from agent_runtime.memory.scope import STATEMENT_HEADER
from agent_runtime.oe.audit_ledger import export_from_env
from agent_runtime.oe.client_auth import (
    INVOKE,
    MEMORY_EXPORT,
    READ,
    Attributes,
    Caller,
    ClientAuth,
    Permission,
    ReviewUnavailable,
    forbidden_body,
    impersonation,
    on_agents,
    route_need,
    unauthorized_body,
    unavailable_body,
)
from agent_runtime.oe.engine import (
    BadReview,
    Conflict,
    NotFound,
    Orchestrator,
    UnknownAgent,
    client_view,
    review_view,
)
from agent_runtime.oe.limiter import LimitReached, default_limits_from_env, refusal_detail
from agent_runtime.oe.llm_streams import collecting_deltas
from agent_runtime.oe.logged_events import LoggedEventBus
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.reviews import MAX_RESUME_BODY_BYTES, ReviewBodyError, flat_review, wrapped_review
from agent_runtime.oe.store.base import ExecutionRecord, Identity, Store
from agent_runtime.oe.store.codec import decode_cursor
from agent_runtime.oe.store.outage import Outage
from agent_runtime.oe.store.unavailable import StoreUnavailable
from agent_runtime.oe.stream_settings import StreamSettings
from agent_runtime.oe.usage import prices_from_env
from agent_runtime.oe.usage_report import usage_view
from agent_runtime.protocol import (
    OE_CALLBACK_PATH,
    OE_GRAPH_STREAM_PATH,
    OE_TOOL_EXECUTE_PATH,
    OE_TOOL_RESULT_PATH,
    ExecutionState,
    ExecutorCallback,
    GraphStreamChunk,
    InvokeRequest,
    MemoryExportRequest,
    ToolExecuteRequest,
    ToolResultRequest,
)
from agent_runtime.servers import connector_test, oe_knowledge
from agent_runtime.servers.a2a import a2a_routes
from agent_runtime.servers.connector_types import CONNECTOR_TYPES_PATH, list_connector_types
from agent_runtime.servers.health import Readiness, health_routes
from agent_runtime.servers.oe_drains import drain_routes
from agent_runtime.servers.oe_metrics import OEMetrics
from agent_runtime.servers.oe_openapi import OPENAPI_PATH, openapi_json
from agent_runtime.servers.oe_threads import thread_routes
from agent_runtime.servers.oe_unavailable import EXCEPTION_HANDLERS
from agent_runtime.servers.sse_events import sse_frames
from agent_runtime.token_file import RotatingToken, TokenLike, as_rotating, grace_from_env

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024
# A cursor encodes a float and an execution id (at most 256 characters) in base64.
MAX_CURSOR_CHARS = 2048
# Event ids are SQLite/BSON integers.
MAX_EVENT_ID = 2**63 - 1
M = TypeVar("M", bound=BaseModel)
Background = Callable[[], Awaitable[None]]
# How often an OE asks its store (one primary-key read) whether it answers, for `/readyz` and the log.
STORE_WATCH_S = 2.0
_WATCH_ID = "~readyz"  # an execution id no execution has (ids are UUIDs)


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
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _edge_checked(raw: bytes) -> bytes:
    """The body, unless its JSON is deeper or its numbers larger than any store holds (400 naming the field).

    The launcher's `BodyGuard` checks this already; an app served without it (tests, embedding) still must
    not reach a RecursionError or an OverflowError.
    """
    problem = json_edge_problem(raw)
    if problem is not None:
        raise HTTPError(400, {"detail": [problem]})
    return raw


async def _resume_body(request: Request) -> Any:
    raw = await _body(
        request,
        limit=MAX_RESUME_BODY_BYTES,
        what="; a resume body is a decision, optional notes and optional edited arguments",
    )
    try:
        # pydantic's parser, not json.loads: it refuses lone surrogates (no store can encode them) and NaN.
        return from_json(_edge_checked(raw), allow_inf_nan=False)
    except ValueError:
        raise HTTPError(
            400, {"detail": [{"field": "(body)", "problem": "not JSON; send a JSON object with a decision"}]}
        ) from None


async def _parse(request: Request, model: type[M]) -> M:
    raw = await _body(request)
    try:
        return model.model_validate_json(_edge_checked(raw) or b"null")
    except ValidationError as exc:
        raise HTTPError(400, {"detail": _problems(exc)}) from None


_DIGITS = re.compile(r"[0-9]{1,19}")  # ASCII only: str.isdigit() takes '²', which int() refuses


def _query_int(raw: str, *, field: str, low: int, high: int) -> int:
    """A query integer in [low, high], else a 400 naming `field` and the range."""
    if not _DIGITS.fullmatch(raw) or not low <= int(raw) <= high:
        raise HTTPError(
            400, {"detail": [{"field": field, "problem": f"must be a whole number from {low} to {high}"}]}
        )
    return int(raw)


def _query_cursor(raw: str | None) -> str | None:
    """A page cursor as a list returned it (checked here, so a forged one is a 400, never a 500)."""
    if not raw:
        return None
    problem = {"field": "cursor", "problem": "not a cursor this list returned; send next_cursor as given"}
    if len(raw) > MAX_CURSOR_CHARS:
        raise HTTPError(400, {"detail": [problem]})
    try:
        created_at, execution_id = decode_cursor(raw)
        execution_id.encode("utf-8")  # a lone surrogate cannot reach a store
    except (ValueError, UnicodeEncodeError):
        raise HTTPError(400, {"detail": [problem]}) from None
    if not math.isfinite(created_at) or not 0 < len(execution_id) <= 256:
        raise HTTPError(400, {"detail": [problem]})
    return raw


def _event_after(request: Request) -> int:
    """`?after=` (or `Last-Event-ID`): the last event seen, 0 when absent; beyond int64 is a 400."""
    raw = request.query_params.get("after")
    field = "after"
    if not raw:
        raw, field = request.headers.get("last-event-id", ""), "last-event-id"
    if not raw:
        return 0
    return _query_int(raw.strip(), field=field, low=0, high=MAX_EVENT_ID)


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    return credentials.strip()


_UNAUTHORIZED = Response(status_code=401, headers={"www-authenticate": "Bearer"})


class Forbidden(Exception):
    """The caller may not do this: 403 with the Status body naming the verb, namespace and the rule."""

    def __init__(self, caller: Caller, attrs: Attributes) -> None:
        super().__init__(attrs)
        self.body = forbidden_body(caller.identity, attrs)


def _client_unauthorized(message: str) -> Response:
    return JSONResponse(unauthorized_body(message), status_code=401, headers={"www-authenticate": "Bearer"})


def _caller(request: Request) -> Caller:
    caller: Caller = request.state.caller  # set by the client guard before any client handler runs
    return caller


def decider(request: Request) -> Identity | None:
    """Who is asking, for the execution's and the audit's `decided_by` (None outside the client guard)."""
    caller = getattr(request.state, "caller", None)
    return caller.identity if isinstance(caller, Caller) else None


def _agent_name(agent: str) -> str:
    return agent.split("/", 1)[1] if "/" in agent else agent


def build_oe_app(
    *,
    engine: Orchestrator,
    registry: RuntimeTokens,
    client_token: TokenLike | None = None,
    client_auth: ClientAuth | None = None,
    known_namespaces: Callable[[], Collection[str]] | None = None,
    background: Sequence[Background] = (),
    on_startup: Sequence[Background] = (),
    on_shutdown: Sequence[Background] = (),
    console: bool = True,
    console_oidc: OIDCSettings | None = None,
) -> Starlette:
    """The OE app; `background` loops (registrations, watchdog) run for the server's life.

    Clients authenticate through `client_auth`, or (tests, dev) with `client_token` alone: the static
    token, read again when its file changes, may act in every namespace. `known_namespaces` are those a
    list asks the API server about when the caller may not read every namespace (the registered Agents').
    """
    readiness = Readiness()
    metrics = OEMetrics()
    engine.observe(metrics)
    background = [*background, lambda: refresh_approvals_waiting(engine, metrics)]
    outage = getattr(engine.store, "outage", None)  # a store whose server can be away (PostgreSQL)
    if isinstance(outage, Outage):
        readiness.checks.append(outage.reason)
        background.append(lambda: watch_store(engine.store))
    if client_auth is None:
        if client_token is None:
            raise ValueError("build_oe_app needs client_auth or a client_token")
        client_auth = ClientAuth(static_token=as_rotating(client_token))
    auth = client_auth

    async def may_invoke(identity: Identity | None, agent: str) -> bool:
        """A child an agentRef starts (oe/children.py): may its parent's invoker invoke that Agent, asked
        as /invoke asks (an execution without a recorded invoker starts none)."""
        if identity is None:
            return False
        namespace, name = agent.split("/", 1)
        return await auth.allowed(auth.recorded(identity), on_agents(INVOKE, namespace, name))

    engine.authorize_children(may_invoke)

    def namespaces_known() -> set[str]:
        if known_namespaces is not None:
            return set(known_namespaces())
        agents = getattr(engine.registry, "agents", ())
        return {agent.split("/", 1)[0] for agent in agents}

    async def require(caller: Caller, attrs: Attributes) -> None:
        if not await auth.allowed(caller, attrs):
            raise Forbidden(caller, attrs)

    async def execution_access(request: Request, caller: Caller, permission: Permission) -> None:
        """An execution the caller may not read is a 404 worded like an unknown one; then the verb's 403."""
        execution_id = request.path_params.get("execution_id", "")
        project_id = request.path_params.get("project_id")
        record = await engine.store.get_execution(execution_id)
        if record is None:
            return  # the handler answers 404 for it, as it always did
        if not await auth.allowed(caller, on_agents(READ, record.project_id, _agent_name(record.agent))):
            where = f" in project {project_id!r}" if project_id is not None else ""
            raise NotFound(f"no execution {execution_id!r}{where}")
        if permission != READ:
            await require(caller, on_agents(permission, record.project_id, _agent_name(record.agent)))

    def client_guard(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            token = _bearer(request)
            if token is None:
                return _client_unauthorized(
                    "no bearer token: send 'Authorization: Bearer <token>' with a token the cluster accepts "
                    "for the audience of this OE (e.g. kubectl create token <sa> --audience agent-engine)"
                )
            try:
                caller = await auth.authenticate(token)
            except ReviewUnavailable as exc:
                return JSONResponse(unavailable_body(f"cannot verify the token: {exc}"), status_code=503)
            if caller is None:
                return _client_unauthorized(
                    "the bearer token was not accepted: unknown, expired or revoked, or not issued for the "
                    f"audience {', '.join(auth.audiences)}"
                )
            request.state.caller = caller
            need = route_need(request.method, request.url.path)

            async def checked(req: Request) -> Response:
                if need is None:
                    raise Forbidden(caller, Attributes(verb=req.method.lower(), resource="agents"))
                if need.kind == "execution" and need.permission is not None:
                    await execution_access(req, caller, need.permission)
                return await handler(req)

            return await _answer(checked, request)

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
        except Forbidden as exc:
            return JSONResponse(exc.body, status_code=403)
        except ReviewUnavailable as exc:
            return JSONResponse(unavailable_body(f"cannot check access: {exc}"), status_code=503)
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
        except LimitReached as exc:
            # spec.limits at /invoke (issue 34): which limit, its value, the figure, and when to retry.
            refusal = exc.refusal
            wait = max(1, math.ceil(refusal.retry_after_s or 1))
            return JSONResponse(
                {"error": refusal.category, "detail": refusal.message, **refusal_detail(refusal)},
                status_code=429,
                headers={"retry-after": str(wait)},
            )

    # client API -----------------------------------------------------------------------------------------

    async def memory_export_token(request: Request) -> Response:
        """A read-only memory statement for one user of one Agent (a data export, a platform job)."""
        project_id, name = request.path_params["project_id"], request.path_params["agent"]
        caller = _caller(request)
        await require(caller, on_agents(MEMORY_EXPORT, project_id, name))
        body = await _parse(request, MemoryExportRequest)
        user_id = body.user_id
        if caller.static:
            if user_id is None:  # the development token stands for no user of its own
                raise HTTPError(
                    400,
                    {
                        "detail": [
                            {"field": "user_id", "problem": "required with the static token: name the user"}
                        ]
                    },
                )
        else:
            # As /invoke: the user is who the token says; naming another takes Kubernetes' impersonate.
            if user_id is None:
                user_id = caller.identity.username
            elif user_id != caller.identity.username:
                await require(caller, impersonation("users", user_id))
            if body.org_id is not None:
                await require(caller, impersonation("groups", body.org_id))
        issued = engine.memory_export_statement(f"{project_id}/{name}", user_id=user_id, org_id=body.org_id)
        if issued is None:
            raise HTTPError(
                409,
                {
                    "error": "statements_disabled",
                    "detail": "this OE has no signing key (AGENTIC_OE_SIGNING_KEY_FILE), so its Agents' "
                    "Memory servers check no statement; install the chart's key pair",
                },
            )
        statement, expires = issued
        answer = {
            "agent": f"{project_id}/{name}",
            "user_id": user_id,
            "org_id": body.org_id,
            "purpose": "export",
            "header": STATEMENT_HEADER,
            "statement": statement,
            "expires_at": expires,
        }
        # A credential: no cache along the way may keep it.
        return JSONResponse(answer, headers={"cache-control": "no-store"})

    async def invoke(request: Request) -> Response:
        body = await _parse(request, InvokeRequest)
        caller = _caller(request)
        namespace, name = body.agent.split("/", 1)
        await require(caller, on_agents(INVOKE, namespace, name))
        user_id = body.user_id
        if not caller.static:
            # The user is who the token says; naming another takes Kubernetes' impersonate right.
            if user_id is None:
                user_id = caller.identity.username
            elif user_id != caller.identity.username:
                await require(caller, impersonation("users", user_id))
            if body.org_id is not None:
                await require(caller, impersonation("groups", body.org_id))
        record = await engine.invoke(body.model_copy(update={"user_id": user_id}), invoked_by=caller.identity)
        metrics.execution_created()
        return JSONResponse(
            {"execution_id": record.execution_id, "status": record.status.value}, status_code=202
        )

    async def with_usage(record: ExecutionRecord) -> dict[str, Any]:
        """The client view with the execution's token usage and cost (summed from its audit)."""
        view = client_view(record)
        reg = engine.registry.get(record.agent)  # the Agent's own pricing names its currency
        currency = engine.prices.overridden_by(reg.prices if reg else None).currency
        used = usage_view(await engine.store.list_audit(record.execution_id), currency=currency)
        if used is not None:
            view["usage"] = used
        return view

    async def get_execution(request: Request) -> Response:
        record = await engine.get(request.path_params["execution_id"])
        return JSONResponse(await with_usage(record))

    async def list_executions(request: Request) -> Response:
        query = request.query_params
        status = query.get("status")
        try:
            state = ExecutionState(status) if status else None
        except ValueError:
            states = ", ".join(s.value for s in ExecutionState)
            raise HTTPError(
                400, {"detail": [{"field": "status", "problem": f"must be one of {states}"}]}
            ) from None
        limit = _query_int(query.get("limit", "50"), field="limit", low=1, high=500)
        cursor = _query_cursor(query.get("cursor"))
        agent, project = query.get("agent") or None, query.get("project") or None
        if agent is not None:
            candidates = {agent.split("/", 1)[0]}
        elif project is not None:
            candidates = {project}
        else:
            candidates = namespaces_known()
        readable = await auth.readable(_caller(request), candidates)
        page = await engine.store.list_executions(
            agent=agent,
            project_id=project,
            project_ids=readable,
            status=state,
            limit=limit,
            cursor=cursor,
        )
        return JSONResponse(
            {"items": [await with_usage(item) for item in page.items], "next_cursor": page.next_cursor}
        )

    async def audit(request: Request) -> Response:
        record = await engine.get(request.path_params["execution_id"])
        records = await engine.store.list_audit(record.execution_id)
        # The chain's signed head beside the records: `agentengine audit verify --file` checks a saved copy.
        head = await engine.store.get_audit_head(record.execution_id)
        return JSONResponse({"records": [entry.model_dump(mode="json") for entry in records], "head": head})

    async def audit_verify(request: Request) -> Response:
        """Is the execution's audit chain intact, or where does it break (issue 34)."""
        return JSONResponse(await engine.verify_audit(request.path_params["execution_id"]))

    async def execution_logs(request: Request) -> Response:
        """The execution's durable log (B-17), authorized exactly as reading the execution."""
        record = await engine.get(request.path_params["execution_id"])
        log = getattr(engine.events, "log", None)
        if log is None or not log.enabled:
            return JSONResponse(
                {
                    "records": [],
                    "enabled": False,
                    "detail": "this OE keeps no execution log: set AGENTIC_EXECUTION_LOG=jsonl,mongodb "
                    "(the chart's executionLog.sinks)",
                }
            )
        records = await log.read(record.execution_id)
        listed = [entry.model_dump(mode="json") for entry in records]
        return JSONResponse({"records": listed, "enabled": True})

    async def events(request: Request) -> Response:
        record = await engine.get(request.path_params["execution_id"])
        after = _event_after(request)

        frames = sse_frames(record.execution_id, engine.events.follow(record.execution_id, after_seq=after))
        return StreamingResponse(
            frames, media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )

    async def cancel(request: Request) -> Response:
        record = await engine.cancel(request.path_params["execution_id"], decided_by=decider(request))
        return JSONResponse(client_view(record))

    async def resume_internal(request: Request) -> Response:
        review = wrapped_review(await _resume_body(request))
        record = await engine.resume(request.path_params["execution_id"], review, decided_by=decider(request))
        return JSONResponse(client_view(record), status_code=202)

    async def resume_gateway(request: Request) -> Response:
        review = flat_review(await _resume_body(request))
        record = await engine.resume(
            request.path_params["execution_id"],
            review,
            project_id=request.path_params["project_id"],
            decided_by=decider(request),
        )
        return JSONResponse(client_view(record), status_code=202)

    async def reviews(request: Request) -> Response:
        query = request.query_params
        limit = _query_int(query.get("limit", "50"), field="limit", low=1, high=500)
        cursor = _query_cursor(query.get("cursor"))
        project_id = request.path_params["project_id"]
        if not await auth.allowed(_caller(request), on_agents(READ, project_id)):
            # Not listed: the same empty answer as a project with nothing to review.
            return JSONResponse({"items": [], "next_cursor": None})
        try:
            items, next_cursor = await engine.pending_reviews(
                request.path_params["project_id"], limit=limit, cursor=cursor
            )
        except ValueError:
            raise HTTPError(
                400, {"detail": [{"field": "cursor", "problem": "not a cursor this list returned"}]}
            ) from None
        return JSONResponse({"items": [review_view(item) for item in items], "next_cursor": next_cursor})

    async def may_invoke(request: Request, namespace: str, name: str) -> None:
        await require(_caller(request), on_agents(INVOKE, namespace, name))

    # runtime API ----------------------------------------------------------------------------------------

    async def tool_execute(request: Request, caller: AgentRegistration) -> Response:
        call = await _parse(request, ToolExecuteRequest)
        with collecting_deltas() as deltas:
            answer = await engine.tool_execute(caller, call)
        if call.stream and deltas:
            answer = answer.model_copy(update={"deltas": deltas})  # the agent streams them (issue 32)
        metrics.step(
            decision="deny" if not answer.proceed else (answer.status or "callback"), cached=answer.from_cache
        )
        return Response(answer.model_dump_json(), media_type="application/json")

    async def tool_result(request: Request, caller: AgentRegistration) -> Response:
        report = await _parse(request, ToolResultRequest)
        await engine.tool_result(caller, report)
        return JSONResponse({"accepted": True})

    async def graph_stream(request: Request, caller: AgentRegistration) -> Response:
        chunk = await _parse(request, GraphStreamChunk)
        await engine.graph_stream(caller, chunk)
        return JSONResponse({"accepted": True})

    async def callback(request: Request, caller: AgentRegistration) -> Response:
        report = await _parse(request, ExecutorCallback)
        record = await engine.callback(caller, report)
        metrics.execution_finished(record.status.value)
        return JSONResponse({"accepted": True, "status": record.status.value})

    async def openapi_endpoint(_: Request) -> Response:
        return Response(openapi_json(), media_type="application/json")

    async def metrics_endpoint(_: Request) -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    routes = [
        # The runtimes' routes first: the router tries routes in order, and every step is one of these.
        Route(OE_TOOL_EXECUTE_PATH, runtime_guard(tool_execute), methods=["POST"]),
        Route(OE_TOOL_RESULT_PATH, runtime_guard(tool_result), methods=["POST"]),
        Route(OE_GRAPH_STREAM_PATH, runtime_guard(graph_stream), methods=["POST"]),
        Route(OE_CALLBACK_PATH, runtime_guard(callback), methods=["POST"]),
        Route("/invoke", client_guard(invoke), methods=["POST"]),
        Route(CONNECTOR_TYPES_PATH, client_guard(list_connector_types), methods=["GET"]),
        Route("/executions", client_guard(list_executions), methods=["GET"]),
        Route("/execution/{execution_id}", client_guard(get_execution), methods=["GET"]),
        Route("/execution/{execution_id}/audit", client_guard(audit), methods=["GET"]),
        Route("/execution/{execution_id}/audit/verify", client_guard(audit_verify), methods=["GET"]),
        Route("/execution/{execution_id}/logs", client_guard(execution_logs), methods=["GET"]),
        Route("/execution/{execution_id}/events", client_guard(events), methods=["GET"]),
        Route("/execution/{execution_id}/cancel", client_guard(cancel), methods=["POST"]),
        *drain_routes(engine, client_guard),
        *thread_routes(engine, client_guard, require=require, caller=_caller),
        # Every Agent as an A2A agent (issue 38): a task is an execution, authorized as the client API.
        *a2a_routes(
            engine,
            client_guard,
            require=require,
            allowed=auth.allowed,
            caller=_caller,
            created=metrics.execution_created,
        ),
        Route("/resume/{execution_id}", client_guard(resume_internal), methods=["POST"]),
        Route(
            "/api/v1/projects/{project_id}/executions/{execution_id}/resume",
            client_guard(resume_gateway),
            methods=["POST"],
        ),
        Route("/api/v1/projects/{project_id}/reviews", client_guard(reviews), methods=["GET"]),
        Route(
            "/api/v1/projects/{project_id}/agents/{agent}/memory-export-token",
            client_guard(memory_export_token),
            methods=["POST"],
        ),
        connector_test.oe_route(engine, client_guard, may_invoke=may_invoke),
        *oe_knowledge.knowledge_routes(engine, client_guard, require=lambda r, a: require(_caller(r), a)),
        *health_routes(readiness),
        Route(METRICS_PATH, metrics_endpoint, methods=["GET"]),
        # The client API's description: public, like the probes (it holds no data, only shapes).
        Route(OPENAPI_PATH, openapi_endpoint, methods=["GET"]),
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

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=EXCEPTION_HANDLERS)
    if console:
        # The web UI (issue 30) under /console: every request it makes is a client request as above.
        mount_console(app, engine=engine, auth=auth, namespaces=namespaces_known, oidc=console_oidc)
    return app


async def refresh_approvals_waiting(
    engine: Orchestrator, metrics: OEMetrics, *, every_s: float = 15.0
) -> None:
    """Keep `agent_engine_approvals_waiting` at the store's count of suspended executions per Agent (every
    replica reads the same store, so each exposes the same numbers; alert on max, not sum)."""
    while True:
        # Every registered Agent has its series, 0 when nothing waits: an alert can tell 0 from no data.
        counts: dict[str, int] = dict.fromkeys(getattr(engine.registry, "agents", ()), 0)
        oldest: dict[str, float] = {}
        cursor: str | None = None
        for _ in range(50):  # at most 10,000 suspended executions are counted
            page = await engine.store.list_executions(
                status=ExecutionState.SUSPENDED, limit=200, cursor=cursor
            )
            now = time.time()
            for item in page.items:
                counts[item.agent] = counts.get(item.agent, 0) + 1
                # A suspended execution's updated_at is when it suspended (nothing writes it while it waits).
                oldest[item.agent] = max(oldest.get(item.agent, 0.0), now - item.updated_at)
            cursor = page.next_cursor
            if cursor is None:
                break
        metrics.approvals_waiting(counts, oldest)
        await asyncio.sleep(every_s)


async def watch_store(store: Store, *, every_s: float = STORE_WATCH_S) -> None:
    """Ask the store every `every_s` whether it answers: its `Outage` notes each answer and each failure, so
    `/readyz` turns 503 within a call's timeout of the server going, and 200 within `every_s` of its return
    even when nothing else calls it."""
    while True:
        with contextlib.suppress(StoreUnavailable):
            await store.get_execution(_WATCH_ID)
        await asyncio.sleep(every_s)


def execution_log_events(
    env: Mapping[str, str], *, store: Store, mongodb_uri: str | None
) -> LoggedEventBus | None:
    """The OE's event bus writing the execution log, when `AGENTIC_EXECUTION_LOG` asks for one (its
    mongodb sink defaults to the OE's own MongoDB); None for the plain bus."""
    log_env = dict(env)
    if mongodb_uri and not log_env.get("MONGODB_URI"):
        log_env["MONGODB_URI"] = mongodb_uri
    log = ExecutionLog.from_env(log_env, component="oe")
    return LoggedEventBus(store=store, log=log) if log.enabled else None


def _log_closer(engine: Orchestrator) -> list[Background]:
    log = getattr(engine.events, "log", None)
    return [log.aclose] if log is not None else []


async def _forever(work: Background) -> None:
    """Run a background loop; an unexpected error is logged and the loop restarted, never lost silently.

    A store outage is not logged here: the store's `Outage` said it once, and says once when it is back."""
    while True:
        try:
            await work()
            return
        except asyncio.CancelledError:
            raise
        except StoreUnavailable:
            await asyncio.sleep(1.0)
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
    from agent_runtime.oe.client_auth import KubernetesReviewer
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
        postgres_url=settings.postgres_url,
        postgres_pool_size=settings.postgres_pool_size,
        postgres_statement_timeout_s=settings.postgres_statement_timeout_s,
        replicas=settings.replicas,
    )
    # An Agent's previous runtime token stays accepted for RUNTIME_TOKEN_GRACE_S after its registration
    # changed: its pods read the rotated Secret each at their own pace.
    source = registrations_from_env(env, registry=Registry(grace_s=grace_from_env(env)))
    auth_settings = settings.client_auth
    assert auth_settings is not None  # from_env always reads them
    client_token = None
    if settings.client_token is not None:
        client_file = env.get(CLIENT_TOKEN_FILE_ENV, "").strip()
        client_token = RotatingToken(
            settings.client_token,
            path=client_file or None,
            setting=CLIENT_TOKEN_FILE_ENV,
            what="client token",
            grace_s=grace_from_env(env, CLIENT_TOKEN_GRACE_ENV),
        )
    reviewer = None
    if auth_settings.kubernetes and auth_settings.api_url is not None:
        sa_dir = auth_settings.service_account_dir
        reviewer = KubernetesReviewer(
            api_url=auth_settings.api_url,
            token_path=sa_dir / "token",
            ca_path=sa_dir / "ca.crt" if (sa_dir / "ca.crt").exists() else None,
        )
    client_auth = ClientAuth(
        reviewer=reviewer,
        static_token=client_token,
        static_namespaces=auth_settings.static_namespaces,
        audiences=auth_settings.audiences,
        oidc_issuers=auth_settings.oidc_issuers,
        cache_ttl_s=auth_settings.cache_ttl_s,
        cache_size=auth_settings.cache_size,
    )
    if client_token is not None:
        scope = ", ".join(sorted(auth_settings.static_namespaces or ())) or "every namespace"
        logger.warning("the static client token (a development setting) is accepted; it may act in %s", scope)
    audit_export = export_from_env(env)  # JSONL and/or OTLP logs (oe/audit_export.py); closed at shutdown
    engine = Orchestrator(
        store=store,
        registry=source.registry,
        runtimes=Runtimes(tool_pod_connect_retry_s=settings.tool_pod_retry_s),
        aer_lost_after_s=settings.aer_lost_after_s,
        run_restarts=settings.run_restarts,
        drain_settings=DrainCallerSettings.from_env(env),
        known_secrets=client_token.accepted if client_token is not None else tuple,
        prices=prices_from_env(env),
        events=execution_log_events(env, store=store, mongodb_uri=settings.mongodb_uri),
        streaming=StreamSettings.from_env(env),
        default_limits=default_limits_from_env(env),
        audit_signer=lambda: source.registry.signer.sign_bytes if source.registry.signer else None,
        audit_public_keys=lambda: source.registry.signer.public_key_pems() if source.registry.signer else (),
        audit_export=audit_export,
    )

    async def watchdog() -> None:
        while True:
            await asyncio.sleep(settings.watchdog_interval_s)
            await engine.watchdog_once()

    return build_oe_app(
        engine=engine,
        registry=source.registry,
        client_auth=client_auth,
        known_namespaces=lambda: {agent.split("/", 1)[0] for agent in source.registry.agents},
        background=[source.run, watchdog, engine.drains.run],
        on_startup=[source.refresh],
        on_shutdown=[
            client_auth.aclose,
            *_log_closer(engine),
            *([lambda: asyncio.to_thread(audit_export.close)] if audit_export is not None else []),
        ],
        console=console_enabled(env),
        console_oidc=console_oidc(env),
    )
