"""The Memory server's HTTP surface (RUNNER_MODE=memory, port 8081): thin handlers over `MemoryService`.

Every route needs the Agent's runtime token (the AER and the Tool Pod hold it), but the knowledge documents,
which the OE's own statement also opens (servers/memory_auth.py); the server's APP_ID is
the workspace of every record, so one Agent's server never reads another's. Errors are
`{"error": code, "detail": ...}` (M-05); a malformed body's detail lists `{field, problem}`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.contract import APP_ID_ENV
from agent_runtime.execution_token import StatementError, StatementVerifier, verifier_from_env
from agent_runtime.memory.embeddings import Embedder, EmbeddingError, embedder_from_env
from agent_runtime.memory.knowledge import KnowledgeService
from agent_runtime.memory.scope import STATEMENT_HEADER, ScopeRefused, check_operation, scoped
from agent_runtime.memory.service import Conflict, InvalidRequest, MemoryService, RecordNotFound
from agent_runtime.memory.store import MemoryStore, open_store
from agent_runtime.memory.wire import (
    KINDS,
    MAX_BODY_BYTES,
    Kind,
    ListBody,
    MoveBody,
    NamespacesBody,
    RecordsAnswer,
    ScopeBody,
    SearchBody,
    SubtreeBody,
    SummarizeBody,
    WriteAnswer,
    WriteBody,
    check_record_id,
)
from agent_runtime.protocol import validation_problems
from agent_runtime.servers.auth import ASGIApp, TokenLike, rotating_runtime_token
from agent_runtime.servers.bodies import read_request_body
from agent_runtime.servers.component_app import build_component_app
from agent_runtime.servers.health import Readiness
from agent_runtime.servers.knowledge import build_knowledge_routes
from agent_runtime.servers.memory_auth import MemoryGuard
from agent_runtime.servers.memory_metrics import MemoryMetrics
from agent_runtime.servers.metrics import ToolMetrics

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
Handler = Callable[[Request, Kind], Awaitable[Response]]


class HTTPError(Exception):
    def __init__(self, status: int, error: str, detail: Any) -> None:
        super().__init__(error)
        self.status = status
        self.body = {"error": error, "detail": detail}


def _kind(request: Request) -> Kind:
    raw = request.path_params.get("kind", "")
    try:
        return Kind(raw)
    except ValueError:
        raise HTTPError(
            404, "unknown_kind", f"{raw[:64]!r} is not a memory kind; use one of {', '.join(KINDS)}"
        ) from None


def _invalid(problems: list[dict[str, str]]) -> HTTPError:
    return HTTPError(400, "invalid_request", problems)


async def _parse(request: Request, model: type[M]) -> M:
    raw = await read_request_body(request, limit=MAX_BODY_BYTES)
    if raw is None:
        raise HTTPError(413, "body_too_large", f"the body is larger than {MAX_BODY_BYTES} bytes")
    try:
        parsed = model.model_validate_json(raw or b"null")
    except ValidationError as exc:
        raise _invalid(validation_problems(exc)) from None
    return _granted(request, parsed)


def _granted(request: Request, body: M) -> M:
    """The body scoped to the statement's user and org (unchanged when the server has no OE key)."""
    claims = getattr(request.state, "statement", None)
    if claims is None:
        return body
    try:
        return scoped(body, org_id=claims.org_id, user_id=claims.user_id)
    except ScopeRefused as exc:
        raise HTTPError(403, exc.reason, exc.detail) from None


def _statement(request: Request, verifier: StatementVerifier, *, workspace_id: str, operation: str) -> None:
    """Verify the OE's memory statement (header `x-agent-engine-statement`) into `request.state`."""
    presented = request.headers.get(STATEMENT_HEADER, "").strip()
    if not presented:
        raise HTTPError(
            403,
            "statement_required",
            f"a memory call needs the OE's statement for its execution in the {STATEMENT_HEADER} header; "
            "MemoryClient sends the one the OE gave the run",
        )
    try:
        claims = verifier.verify(presented, audience="memory", workspace=workspace_id or None)
        check_operation(operation, purpose=claims.purpose)
    except StatementError as exc:
        raise HTTPError(403, f"statement_{exc.reason}", exc.detail) from None
    except ScopeRefused as exc:
        raise HTTPError(403, exc.reason, exc.detail) from None
    request.state.statement = claims


def _record_id(request: Request) -> str:
    record_id = str(request.path_params["record_id"])
    try:
        return check_record_id(record_id)
    except ValueError as exc:
        raise _invalid([{"field": "id", "problem": str(exc)}]) from None


def _scope_from_query(request: Request, *, extra: frozenset[str] = frozenset()) -> ScopeBody:
    params = {key: value for key, value in request.query_params.items() if key not in extra}
    try:
        parsed = ScopeBody.model_validate(params)
    except ValidationError as exc:
        raise _invalid(validation_problems(exc)) from None
    return _granted(request, parsed)


def _json(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")


def build_memory_routes(
    service: MemoryService, metrics: MemoryMetrics, *, verifier: StatementVerifier | None = None
) -> list[Route]:
    """The API routes (M-05) over one service; with `verifier`, each call's user and org come from the
    OE's statement alone (issue 27)."""

    def operation(name: str, handler: Handler, *, kinds: tuple[Kind, ...] | None = None) -> Callable:
        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            label = "unknown"
            try:
                kind = kinds[0] if kinds is not None and len(kinds) == 1 else _kind(request)
                label = kind.value
                if verifier is not None:
                    _statement(request, verifier, workspace_id=service.workspace_id, operation=name)
                response = await handler(request, kind)
            except HTTPError as exc:
                response = JSONResponse(exc.body, status_code=exc.status)
            except InvalidRequest as exc:
                response = JSONResponse(
                    {"error": "invalid_request", "detail": [{"field": exc.field, "problem": exc.problem}]},
                    status_code=400,
                )
            except RecordNotFound as exc:
                detail = f"no {label} record {str(exc)[:128]!r} in this namespace"
                response = JSONResponse({"error": "record_not_found", "detail": detail}, status_code=404)
            except Conflict as exc:
                response = JSONResponse({"error": exc.code, "detail": exc.detail}, status_code=409)
            except EmbeddingError as exc:
                logger.warning("memory %s.%s: %s", label, name, exc)
                response = JSONResponse(
                    {"error": "embeddings_unavailable", "detail": str(exc)}, status_code=503
                )
            except Exception as exc:
                # The store failed (locked, unreachable): a JSON 503 the SDK maps, details in our log only.
                logger.exception("memory %s.%s failed", label, name)
                detail = (
                    f"the memory store failed ({type(exc).__name__}); retry, or see the Memory server's log"
                )
                response = JSONResponse({"error": "store_unavailable", "detail": detail}, status_code=503)
            metrics.observe(
                kind=label,
                operation=name,
                status=response.status_code,
                duration_s=time.perf_counter() - started,
            )
            return response

        return endpoint

    async def write(request: Request, kind: Kind) -> Response:
        body = await _parse(request, WriteBody)
        record, created = await service.write(kind, body)
        return _json(WriteAnswer(record=record.view(), created=created), 201 if created else 200)

    async def get(request: Request, kind: Kind) -> Response:
        record_id = _record_id(request)
        return _json(await service.get(kind, _scope_from_query(request), record_id))

    async def delete(request: Request, kind: Kind) -> Response:
        record_id = _record_id(request)
        cascade = request.query_params.get("cascade", "false").lower()
        if cascade not in ("true", "false"):
            raise _invalid([{"field": "cascade", "problem": "must be true or false"}])
        scope = _scope_from_query(request, extra=frozenset({"cascade"}))
        await service.delete(kind, scope, record_id, cascade=cascade == "true")
        return Response(status_code=204)

    async def search(request: Request, kind: Kind) -> Response:
        return _json(RecordsAnswer(results=await service.search(kind, await _parse(request, SearchBody))))

    async def list_records(request: Request, kind: Kind) -> Response:
        return _json(RecordsAnswer(results=await service.list_window(kind, await _parse(request, ListBody))))

    async def namespaces(request: Request, kind: Kind) -> Response:
        names = await service.namespaces(kind, await _parse(request, NamespacesBody))
        return JSONResponse({"namespaces": names})

    async def summarize(request: Request, _: Kind) -> Response:
        return _json(await service.summarize(await _parse(request, SummarizeBody)))

    async def move(request: Request, _: Kind) -> Response:
        record_id = _record_id(request)
        return _json(await service.move(record_id, await _parse(request, MoveBody)))

    async def subtree(request: Request, _: Kind) -> Response:
        return _json(RecordsAnswer(results=await service.subtree(await _parse(request, SubtreeBody))))

    episodic, taxonomic = (Kind.EPISODIC,), (Kind.TAXONOMIC,)
    return [
        # Fixed paths first, so "episodic/summarize" is never read as a record route.
        Route(
            "/memory/episodic/summarize", operation("summarize", summarize, kinds=episodic), methods=["POST"]
        ),
        Route("/memory/taxonomic/subtree", operation("subtree", subtree, kinds=taxonomic), methods=["POST"]),
        Route(
            "/memory/taxonomic/records/{record_id}/move",
            operation("move", move, kinds=taxonomic),
            methods=["POST"],
        ),
        Route("/memory/{kind}/records", operation("write", write), methods=["POST"]),
        Route("/memory/{kind}/records/{record_id}", operation("get", get), methods=["GET"]),
        Route("/memory/{kind}/records/{record_id}", operation("delete", delete), methods=["DELETE"]),
        Route("/memory/{kind}/search", operation("search", search), methods=["POST"]),
        Route("/memory/{kind}/list", operation("list", list_records), methods=["POST"]),
        Route("/memory/{kind}/namespaces", operation("namespaces", namespaces), methods=["POST"]),
    ]


def build_memory_app(
    *,
    store: MemoryStore,
    embedder: Embedder,
    token: TokenLike,
    workspace_id: str,
    verifier: StatementVerifier | None = None,
) -> ASGIApp:
    """The Memory server: opens the store (and loads a local model) at start-up, closes them at shutdown."""
    service = MemoryService(store=store, embedder=embedder, workspace_id=workspace_id)
    metrics = ToolMetrics(component="memory")
    readiness = Readiness()

    async def on_startup() -> None:
        await store.open()
        load = getattr(embedder, "load", None)
        if load is not None:  # the local model: load it now, not on the first caller's request
            import anyio.to_thread

            await anyio.to_thread.run_sync(load)
        logger.info("memory store %r open; embeddings model %s", store, embedder.model_id)

    async def on_shutdown() -> None:
        await store.close()
        await embedder.aclose()

    memory_metrics = MemoryMetrics(metrics.registry)
    knowledge = KnowledgeService(store=store, embedder=embedder, workspace_id=workspace_id)
    return build_component_app(
        routes=[
            *build_memory_routes(service, memory_metrics, verifier=verifier),
            *build_knowledge_routes(knowledge, memory_metrics),
        ],
        token=token,
        metrics=metrics,
        readiness=readiness,
        on_startup=on_startup,
        on_shutdown=on_shutdown,
        # The runtime token everywhere; the OE's knowledge statement on the documents routes only.
        guard=lambda inner: MemoryGuard(inner, token=token, verifier=verifier, workspace=workspace_id),
    )


def build_memory_from_env(env: Mapping[str, str]) -> ASGIApp:
    """RUNNER_MODE=memory: the token, the store (M-02) and the embedder (M-06) from the environment."""
    token = rotating_runtime_token(env)  # read again when the mounted Secret changes
    store = open_store(env)
    embedder = embedder_from_env(env)
    verifier = verifier_from_env(env)  # the OE's public key: user and org from its statements only
    if verifier is None:
        logger.warning(
            "no OE public key (AGENTIC_OE_PUBLIC_KEY_FILE): callers name the user and org themselves; "
            "give the operator AGENT_OPERATOR_OE_PUBLIC_KEY_FILE so that rendered pods mount it"
        )
    return build_memory_app(
        store=store,
        embedder=embedder,
        token=token,
        workspace_id=env.get(APP_ID_ENV, "").strip(),
        verifier=verifier,
    )
