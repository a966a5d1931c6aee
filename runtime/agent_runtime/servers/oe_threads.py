"""The OE's client routes for LangGraph threads (issue 31, LG-13): authorized here, answered by the AER.

- `GET  /api/v1/projects/{project}/agents/{agent}/sessions`: the Agent's sessions with a thread.
- `GET  /api/v1/projects/{project}/agents/{agent}/sessions/{session_id}/messages`: a session's history.
- `GET  /api/v1/projects/{project}/agents/{agent}/sessions/{session_id}/state`: `get_state` of its thread.
- `POST /api/v1/projects/{project}/agents/{agent}/sessions/{session_id}/state`
  `{"values": {...}, "as_node": "..."?}`: `update_state`.
- `POST /api/v1/projects/{project}/agents/{agent}/sessions/{session_id}/fork`
  `{"execution_id": "...", "step": N, "session_id": "..."?}`: session fork (LG-18, oe/forks.py): that
  finished execution's turn again in a new session, its steps before N from the cache; 202 with the new
  execution. It starts an execution, so it takes the invoke right.

Reading is authorized like reading the Agent's executions (`agents/executions` get); writing a thread's
state changes what the agent goes on with, so it takes the reviewer's right (`agents/approve`). The AER
holds the checkpoints and reads only workspace-scoped keys (LG-06); its answer (status and body) is
passed through, the OE's own refusals name the field.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.oe.client_auth import APPROVE, INVOKE, READ, Attributes, Caller, on_agents
from agent_runtime.oe.engine import Orchestrator
from agent_runtime.oe.runtimes import RuntimeUnavailable
from agent_runtime.oe.views import client_view
from agent_runtime.servers.bodies import malformed, read_request_body, too_large

Handler = Callable[[Request], Awaitable[Response]]
Require = Callable[[Caller, Attributes], Awaitable[None]]
PREFIX = "/api/v1/projects/{project_id}/agents/{agent}/sessions"
MAX_STATE_BODY_BYTES = 1024 * 1024


class ForkRequest(BaseModel):
    """The fork route's body: which execution of the session, from which step, into which new session."""

    model_config = ConfigDict(extra="forbid")

    execution_id: str = Field(min_length=1, max_length=256)
    step: int = Field(ge=1)
    session_id: str | None = Field(default=None, min_length=1, max_length=256)


def thread_routes(
    engine: Orchestrator,
    guard: Callable[[Handler], Handler],
    *,
    require: Require,
    caller: Callable[[Request], Caller],
) -> list[Route]:
    async def forward(request: Request, path: str, *, write: bool = False) -> Response:
        project, agent = request.path_params["project_id"], request.path_params["agent"]
        await require(caller(request), on_agents(APPROVE if write else READ, project, agent))
        reg = engine.registry.get(f"{project}/{agent}")
        if reg is None:
            return JSONResponse({"detail": f"no Agent {agent!r} in project {project!r}"}, status_code=404)
        body = None
        if write:
            body = await read_request_body(request, limit=MAX_STATE_BODY_BYTES)
            if body is None:
                return JSONResponse(too_large(MAX_STATE_BODY_BYTES), status_code=413)
        try:
            status, answer = await engine.runtimes.aer_json(reg, request.method, path, body=body)
        except RuntimeUnavailable as exc:
            return JSONResponse({"detail": str(exc)}, status_code=503)
        if status in (401, 403):
            # The AER refused the OE's own statement: a misconfigured registration, never the client's fault.
            return JSONResponse(
                {"detail": f"the AER of {reg.agent} refused the OE (HTTP {status})"}, status_code=502
            )
        return JSONResponse(answer, status_code=status)

    def session(request: Request) -> str:
        return quote(request.path_params["session_id"], safe="")

    async def sessions(request: Request) -> Response:
        return await forward(request, "/query/sessions")

    async def messages(request: Request) -> Response:
        return await forward(request, f"/query/sessions/{session(request)}/messages")

    async def state(request: Request) -> Response:
        return await forward(request, f"/threads/{session(request)}/state", write=request.method == "POST")

    async def fork(request: Request) -> Response:
        project, agent = request.path_params["project_id"], request.path_params["agent"]
        who = caller(request)
        await require(who, on_agents(INVOKE, project, agent))
        body = await read_request_body(request, limit=MAX_STATE_BODY_BYTES)
        if body is None:
            return JSONResponse(too_large(MAX_STATE_BODY_BYTES), status_code=413)
        try:
            asked = ForkRequest.model_validate_json(body)
        except ValidationError as exc:
            return JSONResponse(malformed(exc), status_code=400)
        parent = await engine.get(asked.execution_id, project_id=project)
        if parent.session_id != request.path_params["session_id"]:
            return JSONResponse(
                {"detail": f"execution_id: {asked.execution_id!r} is not of this session"}, status_code=400
            )
        try:
            record = await engine.fork(
                asked.execution_id,
                step=asked.step,
                agent=f"{project}/{agent}",
                session_id=asked.session_id,
                invoked_by=who.identity,
            )
        except RuntimeUnavailable as exc:
            return JSONResponse({"detail": str(exc)}, status_code=503)
        return JSONResponse(client_view(record), status_code=202)

    return [
        Route(PREFIX + "/{session_id}/fork", guard(fork), methods=["POST"]),
        Route(PREFIX, guard(sessions), methods=["GET"]),
        Route(PREFIX + "/{session_id}/messages", guard(messages), methods=["GET"]),
        Route(PREFIX + "/{session_id}/state", guard(state), methods=["GET", "POST"]),
    ]
