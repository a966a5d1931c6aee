"""Liveness and readiness: alive while the process serves; ready once bundle and entrypoint are loaded
(and, for a server with `checks`, while each check finds nothing wrong: the OE's store answering)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

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
    # Each says why the server cannot do its work now (None: it can); asked at every `/readyz`.
    checks: list[Callable[[], str | None]] = field(default_factory=list)

    def not_ready_because(self) -> str | None:
        if not self.ready:
            return self.reason
        for check in self.checks:
            reason = check()
            if reason is not None:
                return reason
        return None

    def mark_ready(self) -> None:
        self.ready, self.reason = True, "ready"

    def mark_shutting_down(self) -> None:
        self.ready, self.reason = False, "shutting down"


def health_routes(readiness: Readiness) -> list[Route]:
    """`GET /healthz` and `GET /readyz`."""

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "alive"})

    async def readyz(_: Request) -> Response:
        reason = readiness.not_ready_because()
        if reason is None:
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": "not ready", "reason": reason}, status_code=503)

    return [Route(HEALTH_PATH, healthz, methods=["GET"]), Route(READY_PATH, readyz, methods=["GET"])]
