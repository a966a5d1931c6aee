"""The Memory server's knowledge-base routes: thin handlers over `KnowledgeService`.

They sit behind the Memory server's guard (servers/memory_auth.py): the Agent's runtime token opens them
all (the Tool Pod's `knowledge` connector); the OE's knowledge statement, scoped to this Agent, opens the
documents routes (the client API's). Knowledge belongs to the Agent, not to a user, so no user statement
is read: the partition is fixed by the server's APP_ID alone (see memory/knowledge.py). Errors are
`{"error": code, "detail": ...}`, a malformed body's detail a list of `{field, problem}`, like the memory
routes'.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.memory.embedder import EmbeddingError
from agent_runtime.memory.knowledge import KnowledgeService
from agent_runtime.memory.knowledge_wire import (
    MAX_INGEST_BODY_BYTES,
    SOURCES_LIMIT_MAX,
    IngestBody,
    KnowledgeSearchBody,
    SearchAnswer,
    SourcesAnswer,
    check_chunk_id,
    check_source,
)
from agent_runtime.memory.service import InvalidRequest, RecordNotFound
from agent_runtime.memory.wire import MAX_BODY_BYTES
from agent_runtime.protocol import validation_problems
from agent_runtime.servers.bodies import read_request_body
from agent_runtime.servers.memory_metrics import MemoryMetrics

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
KIND_LABEL = "knowledge"


class _Refused(Exception):
    def __init__(self, status: int, error: str, detail: Any) -> None:
        super().__init__(error)
        self.status = status
        self.body = {"error": error, "detail": detail}


def _invalid(field: str, problem: str) -> _Refused:
    return _Refused(400, "invalid_request", [{"field": field, "problem": problem}])


async def _parse(request: Request, model: type[M], *, limit: int) -> M:
    raw = await read_request_body(request, limit=limit)
    if raw is None:
        raise _Refused(413, "body_too_large", f"the body is larger than {limit} bytes; split the document")
    try:
        return model.model_validate_json(raw or b"null")
    except ValidationError as exc:
        raise _Refused(400, "invalid_request", validation_problems(exc)) from None


def _json(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")


def _source_param(request: Request) -> str:
    source = request.query_params.get("source")
    if source is None:
        raise _invalid("source", "is required: the document's source, as it was ingested")
    try:
        return check_source(source)
    except ValueError as exc:
        raise _invalid("source", str(exc)) from None


def _int_param(request: Request, name: str, *, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit() and low <= int(raw) <= high):
        raise _invalid(name, f"must be a whole number {low}-{high}")
    return int(raw)


def build_knowledge_routes(service: KnowledgeService, metrics: MemoryMetrics) -> list[Route]:
    """`/knowledge/...` over one Agent's knowledge base."""

    def operation(name: str, handler: Callable[[Request], Awaitable[Response]]) -> Callable:
        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            try:
                response = await handler(request)
            except _Refused as exc:
                response = JSONResponse(exc.body, status_code=exc.status)
            except InvalidRequest as exc:
                body = {"error": "invalid_request", "detail": [{"field": exc.field, "problem": exc.problem}]}
                response = JSONResponse(body, status_code=400)
            except RecordNotFound as exc:
                detail = f"no knowledge chunk {str(exc)[:128]!r}; search again for current ids"
                response = JSONResponse({"error": "chunk_not_found", "detail": detail}, status_code=404)
            except EmbeddingError as exc:
                logger.warning("knowledge %s: %s", name, exc)
                response = JSONResponse(
                    {"error": "embeddings_unavailable", "detail": str(exc)}, status_code=503
                )
            except Exception as exc:
                logger.exception("knowledge %s failed", name)
                detail = (
                    f"the memory store failed ({type(exc).__name__}); retry, or see the Memory server's log"
                )
                response = JSONResponse({"error": "store_unavailable", "detail": detail}, status_code=503)
            metrics.observe(
                kind=KIND_LABEL,
                operation=name,
                status=response.status_code,
                duration_s=time.perf_counter() - started,
            )
            return response

        return endpoint

    async def ingest(request: Request) -> Response:
        answer = await service.ingest(await _parse(request, IngestBody, limit=MAX_INGEST_BODY_BYTES))
        return _json(answer, 201 if answer.status == "created" else 200)

    async def sources(request: Request) -> Response:
        limit = _int_param(request, "limit", default=100, low=1, high=SOURCES_LIMIT_MAX)
        offset = _int_param(request, "offset", default=0, low=0, high=2**31 - 1)
        return _json(SourcesAnswer(sources=await service.sources(limit=limit, offset=offset)))

    async def delete(request: Request) -> Response:
        removed = await service.delete_source(_source_param(request))
        return JSONResponse({"removed": removed})

    async def search(request: Request) -> Response:
        body = await _parse(request, KnowledgeSearchBody, limit=MAX_BODY_BYTES)
        return _json(SearchAnswer(results=await service.search(body)))

    async def get(request: Request) -> Response:
        raw = str(request.path_params["chunk_id"])
        try:
            chunk_id = check_chunk_id(raw)
        except ValueError as exc:
            raise _invalid("id", str(exc)) from None
        return _json(await service.get(chunk_id))

    return [
        Route("/knowledge/documents", operation("ingest", ingest), methods=["POST"]),
        Route("/knowledge/documents", operation("sources", sources), methods=["GET"]),
        Route("/knowledge/documents", operation("forget", delete), methods=["DELETE"]),
        Route("/knowledge/search", operation("search", search), methods=["POST"]),
        Route("/knowledge/chunks/{chunk_id}", operation("get", get), methods=["GET"]),
    ]
