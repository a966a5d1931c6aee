"""`POST /drain` and `POST /interrupt/call` on the AER and the Tool Pod: thin routes over `WorkRegistry`.

Both are behind the component's bearer guard. The workspace check comes first (400 without `workspace_id`,
403 `workspace_mismatch` on a managed runtime), then:

- `/drain`: 202 `{"outcome": "accepted"}` while the work settles; 200 `completed`, `timed_out` or
  `delivery_failed` with `reason_code=execution_not_found` after; 400 `deadline_too_far` (with `max_ms`),
  409 `request_id_conflict` for a request_id that names another execution's drain.
- `/interrupt/call`: always 200 with `interrupted`, `not_found`, `already_settled` or `not_cancellable`.

Every answer names the pod that gave it (`pod_name`, `pod_address`, Decision 8).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.protocol import (
    DRAIN_PATH,
    INTERRUPT_CALL_PATH,
    DrainAnswer,
    DrainRequest,
    InterruptCallAnswer,
    InterruptCallRequest,
)
from agent_runtime.servers.bodies import malformed, read_request_body, too_large
from agent_runtime.servers.drain import (
    DeadlineTooFar,
    PodIdentity,
    RequestIdConflict,
    WorkRegistry,
    WorkspaceMismatch,
    WorkspaceMissing,
    check_workspace,
)

# These bodies are a handful of ids; anything larger is not one of them.
MAX_CONTROL_BODY_BYTES = 64 * 1024

_MISSING_WORKSPACE = {
    "detail": [
        {
            "field": "workspace_id",
            "problem": "required on this managed runtime (APP_ID is set): send the Agent's APP_ID",
        }
    ]
}
_MISMATCH = {
    "error": "workspace_mismatch",
    "detail": "workspace_id does not name this runtime's workspace (APP_ID); send the Agent's own",
}


def work_routes(registry: WorkRegistry, *, app_id: str | None, pod: PodIdentity) -> list[Route]:
    """The two control routes of a runtime whose tracked work is in `registry`."""

    async def parse(request: Request, model: type[Any]) -> Any:
        body = await read_request_body(request, limit=MAX_CONTROL_BODY_BYTES)
        if body is None:
            return JSONResponse(too_large(MAX_CONTROL_BODY_BYTES), status_code=413)
        try:
            parsed = model.model_validate_json(body or b"null")
        except ValidationError as exc:
            return JSONResponse(malformed(exc), status_code=400)
        try:
            check_workspace(app_id, parsed.workspace_id)
        except WorkspaceMissing:
            return JSONResponse(_MISSING_WORKSPACE, status_code=400)
        except WorkspaceMismatch:
            return JSONResponse(_MISMATCH, status_code=403)
        return parsed

    async def drain(request: Request) -> Response:
        call = await parse(request, DrainRequest)
        if isinstance(call, Response):
            return call
        try:
            outcome, reason_code = registry.drain(
                request_id=call.request_id,
                execution_id=call.execution_id,
                reason=call.reason,
                deadline_at_ms=call.deadline_at_ms,
            )
        except DeadlineTooFar as exc:
            return JSONResponse(
                {
                    "error": "deadline_too_far",
                    "max_ms": exc.max_ms,
                    "detail": f"deadline_at_ms may be at most {exc.max_ms} ms ahead of now "
                    "(RUNNER_DRAIN_MAX_DEADLINE_MS); send an earlier absolute deadline",
                },
                status_code=400,
            )
        except RequestIdConflict:
            return JSONResponse(
                {
                    "error": "request_id_conflict",
                    "detail": "this request_id names the drain of another execution; use a new request_id "
                    "per drain and the same one on every retry of it",
                },
                status_code=409,
            )
        answer = DrainAnswer(
            outcome=outcome, reason_code=reason_code, pod_name=pod.name, pod_address=pod.address
        )
        return JSONResponse(
            answer.model_dump(exclude_none=True), status_code=202 if outcome == "accepted" else 200
        )

    async def interrupt(request: Request) -> Response:
        call = await parse(request, InterruptCallRequest)
        if isinstance(call, Response):
            return call
        outcome = registry.interrupt(call.execution_id, call.step_number)
        answer = InterruptCallAnswer(outcome=outcome, pod_name=pod.name, pod_address=pod.address)
        return JSONResponse(answer.model_dump(exclude_none=True))

    return [
        Route(DRAIN_PATH, drain, methods=["POST"]),
        Route(INTERRUPT_CALL_PATH, interrupt, methods=["POST"]),
    ]
