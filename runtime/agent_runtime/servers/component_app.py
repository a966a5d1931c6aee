"""What every component server shares: probes, metrics, the bearer-token guard, readiness lifespan."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_runtime.contract import METRICS_PATH
from agent_runtime.servers.auth import ASGIApp, BearerTokenGuard, TokenLike
from agent_runtime.servers.health import Readiness, health_routes
from agent_runtime.servers.metrics import ToolMetrics

Hook = Callable[[], Awaitable[None]]


def build_component_app(
    *,
    routes: Sequence[BaseRoute],
    token: TokenLike,
    metrics: ToolMetrics,
    readiness: Readiness,
    on_startup: Hook | None = None,
    on_shutdown: Hook | None = None,
    fast_path: Callable[[ASGIApp], ASGIApp] | None = None,
    guard: Callable[[ASGIApp], ASGIApp] | None = None,
) -> ASGIApp:
    """A Starlette app with the component's routes plus /healthz, /readyz and /metrics, behind the token.

    `fast_path` wraps the Starlette app (inside the token guard) for a hot route served as plain ASGI.
    `guard`, when given, replaces the token guard (a runtime the OE calls: `StatementGuard`).
    """

    async def metrics_endpoint(_: Request) -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if on_startup is not None:
            await on_startup()
        readiness.mark_ready()
        try:
            yield
        finally:
            readiness.mark_shutting_down()
            if on_shutdown is not None:
                await on_shutdown()

    app = Starlette(
        routes=[*routes, *health_routes(readiness), Route(METRICS_PATH, metrics_endpoint, methods=["GET"])],
        lifespan=lifespan,
    )
    inner: ASGIApp = fast_path(app) if fast_path is not None else app
    if guard is not None:
        return guard(inner)
    return BearerTokenGuard(inner, token=token)
