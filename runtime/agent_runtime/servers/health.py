"""Liveness and readiness: alive while the process serves; ready once bundle and entrypoint are loaded."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.contract import HEALTH_PATH, READY_PATH


@dataclass
class Readiness:
    """Flipped by the server's lifespan: ready after start-up, not ready again while shutting down.

    Shutting down is the process's SIGTERM path; it is not an execution's drain (`POST /drain`, DR-14).
    """

    ready: bool = False
    reason: str = "starting"

    def mark_ready(self) -> None:
        self.ready, self.reason = True, "ready"

    def mark_shutting_down(self) -> None:
        self.ready, self.reason = False, "shutting down"


def health_routes(readiness: Readiness) -> list[Route]:
    """`GET /healthz` and `GET /readyz`."""

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "alive"})

    async def readyz(_: Request) -> Response:
        if readiness.ready:
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": "not ready", "reason": readiness.reason}, status_code=503)

    return [Route(HEALTH_PATH, healthz, methods=["GET"]), Route(READY_PATH, readyz, methods=["GET"])]
