"""The OE's client routes for LangGraph threads (issue 31, LG-13): authorized here, answered by the AER.

- `GET  /api/v1/projects/{project}/agents/{agent}/sessions`: the Agent's sessions with a thread.
- `GET  /api/v1/projects/{project}/agents/{agent}/sessions/{session_id}/messages`: a session's history.
- `GET  /api/v1/projects/{project}/agents/{agent}/sessions/{session_id}/state`: `get_state` of its thread.
- `POST /api/v1/projects/{project}/agents/{agent}/sessions/{session_id}/state`
  `{"values": {...}, "as_node": "..."?}`: `update_state`.

Reading is authorized like reading the Agent's executions (`agents/executions` get); writing a thread's
state changes what the agent goes on with, so it takes the reviewer's right (`agents/approve`). The AER
holds the checkpoints and reads only workspace-scoped keys (LG-06); its answer (status and body) is
passed through, the OE's own refusals name the field.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.oe.client_auth import APPROVE, READ, Attributes, Caller, on_agents
from agent_runtime.oe.engine import Orchestrator
from agent_runtime.oe.runtimes import RuntimeUnavailable
from agent_runtime.servers.bodies import read_request_body, too_large

Handler = Callable[[Request], Awaitable[Response]]
Require = Callable[[Caller, Attributes], Awaitable[None]]
PREFIX = "/api/v1/projects/{project_id}/agents/{agent}/sessions"
MAX_STATE_BODY_BYTES = 1024 * 1024


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

    return [
        Route(PREFIX, guard(sessions), methods=["GET"]),
        Route(PREFIX + "/{session_id}/messages", guard(messages), methods=["GET"]),
        Route(PREFIX + "/{session_id}/state", guard(state), methods=["GET", "POST"]),
    ]
