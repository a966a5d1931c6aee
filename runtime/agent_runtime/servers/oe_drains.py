"""The client API of drains and interrupts on the OE: thin routes over `Orchestrator` and `DrainCaller`.

- `GET /execution/{id}/drain`: the drain a cancel started (state `open`, `quiet` or `unconfirmed`, and what
  each runtime answered); 404 `drain_not_found` when the execution was never cancelled.
- `POST /execution/{id}/interrupt {"step": N}`: interrupt the call at step N of a running execution (202 with
  the interrupt record, delivered in the background; 409 when the execution is not running).
- `GET /execution/{id}/interrupts/{step}`: that record (state `open`, `done` or `unconfirmed`, and the
  outcome: interrupted, not_found, already_settled or not_cancellable).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.oe.drains import delivery_view
from agent_runtime.oe.engine import Orchestrator
from agent_runtime.oe.store.deliveries import drain_key, interrupt_key
from agent_runtime.protocol import MAX_STEP, Step, validation_problems

Handler = Callable[[Request], Awaitable[Response]]
MAX_INTERRUPT_BODY_BYTES = 4096


class InterruptBody(BaseModel):
    """`POST /execution/{id}/interrupt`: which call."""

    model_config = ConfigDict(extra="forbid")

    step: Step


def drain_routes(engine: Orchestrator, guard: Callable[[Handler], Handler]) -> list[Route]:
    """The routes, each behind the client guard (which maps NotFound to 404 and Conflict to 409)."""

    async def drain(request: Request) -> Response:
        record = await engine.get(request.path_params["execution_id"])
        delivery = await engine.store.get_delivery(drain_key(record.execution_id))
        if delivery is None:
            return JSONResponse(
                {
                    "error": "drain_not_found",
                    "detail": "this execution was not cancelled, so nothing drains it",
                },
                status_code=404,
            )
        return JSONResponse(delivery_view(delivery))

    async def interrupt(request: Request) -> Response:
        raw = await request.body()
        if len(raw) > MAX_INTERRUPT_BODY_BYTES:
            problem = f"larger than {MAX_INTERRUPT_BODY_BYTES} bytes"
            return JSONResponse({"detail": [{"field": "(body)", "problem": problem}]}, status_code=413)
        try:
            body = InterruptBody.model_validate_json(raw or b"null")
        except ValidationError as exc:
            return JSONResponse({"detail": validation_problems(exc)}, status_code=400)
        # The client guard put the caller there: the interrupt records who asked for it.
        decided_by = getattr(getattr(request.state, "caller", None), "identity", None)
        delivery = await engine.interrupt(
            request.path_params["execution_id"], body.step, decided_by=decided_by
        )
        return JSONResponse(delivery_view(delivery), status_code=202)

    async def interrupt_status(request: Request) -> Response:
        record = await engine.get(request.path_params["execution_id"])
        step = int(request.path_params["step"])
        if not 1 <= step <= MAX_STEP:
            problem = f"must be a step number from 1 to {MAX_STEP}"
            return JSONResponse({"detail": [{"field": "step", "problem": problem}]}, status_code=400)
        delivery = await engine.store.get_delivery(interrupt_key(record.execution_id, step))
        if delivery is None:
            return JSONResponse(
                {"error": "interrupt_not_found", "detail": f"no interrupt of step {step} was asked"},
                status_code=404,
            )
        return JSONResponse(delivery_view(delivery))

    return [
        Route("/execution/{execution_id}/drain", guard(drain), methods=["GET"]),
        Route("/execution/{execution_id}/interrupt", guard(interrupt), methods=["POST"]),
        Route("/execution/{execution_id}/interrupts/{step:int}", guard(interrupt_status), methods=["GET"]),
    ]
