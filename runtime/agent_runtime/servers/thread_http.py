"""The AER's thread routes (issue 31, LG-13): a LangGraph session's state and history, for the OE.

- `GET /threads/{session_id}/state`: the thread as `graph.get_state` sees it (values, next, interrupts).
- `POST /threads/{session_id}/state` `{"values": {...}, "as_node": "..."?}`: `graph.update_state`.
- `POST /threads/{session_id}/fork` `{"execution_id", "to_session_id", "to_execution_id"}`: session fork
  (LG-18), the thread up to that execution's turn copied into the new session's.
- `GET /query/sessions`: the workspace's sessions with a thread; `GET /query/sessions/{id}/messages`.

The OE authorizes the client and forwards (servers/oe_threads.py); the workspace is this AER's APP_ID, so a
session is read only under its scoped key (LG-06). With the OE's public key these routes open only to the
OE's statement: the runtime token, which the Tool Pod holds too, does not open them. An App that is not a
LangGraph App answers 404.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.sdk import App
from agent_runtime.servers.bodies import malformed, read_request_body, too_large

THREAD_STATE_PATH = "/threads/{session_id}/state"
THREAD_FORK_PATH = "/threads/{session_id}/fork"
SESSIONS_PATH = "/query/sessions"
SESSION_MESSAGES_PATH = "/query/sessions/{session_id}/messages"
MAX_UPDATE_BODY_BYTES = 1024 * 1024

Body = TypeVar("Body", bound=BaseModel)


def is_thread_path(path: str) -> bool:
    """A thread route: opened only by the OE's statement, never by the runtime token."""
    return path.startswith(("/threads/", SESSIONS_PATH))


class ThreadFork(BaseModel):
    """`POST /threads/{session_id}/fork`: copy the thread up to `execution_id`'s turn into a new session."""

    model_config = ConfigDict(extra="forbid")

    execution_id: str = Field(min_length=1, max_length=256)
    to_session_id: str = Field(min_length=1, max_length=256)
    to_execution_id: str = Field(min_length=1, max_length=256)


class ThreadUpdate(BaseModel):
    """`POST /threads/{session_id}/state`: the values to write, as the node `as_node` would."""

    model_config = ConfigDict(extra="forbid")

    values: dict[str, Any]
    as_node: str | None = Field(default=None, min_length=1, max_length=256)


def _refusal(exc: Exception) -> Response | None:
    status = getattr(exc, "status", None)
    if isinstance(status, int) and type(exc).__name__ == "ThreadUnavailable":
        return JSONResponse({"detail": str(exc)}, status_code=status)
    return None


async def parsed(request: Request, model: type[Body]) -> Body | Response:
    """The request's body as `model`, or the 413 or 400 answer naming what is wrong."""
    body = await read_request_body(request, limit=MAX_UPDATE_BODY_BYTES)
    if body is None:
        return JSONResponse(too_large(MAX_UPDATE_BODY_BYTES), status_code=413)
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        return JSONResponse(malformed(exc), status_code=400)


def thread_routes(app: App, *, app_id: str | None) -> list[Route]:
    workspace = app_id or ""

    def served() -> Response | None:
        if callable(getattr(app, "thread_state", None)):
            return None
        return JSONResponse(
            {"detail": "this Agent is not a LangGraph App: it keeps no threads"}, status_code=404
        )

    async def answer(call: Any) -> Response:
        try:
            return JSONResponse(await call)
        except Exception as exc:
            refused = _refusal(exc)
            if refused is None:
                raise
            return refused

    async def state(request: Request) -> Response:
        refused = served()
        if refused is not None:
            return refused
        session_id = request.path_params["session_id"]
        return await answer(app.thread_state(session_id, workspace_id=workspace))  # type: ignore[attr-defined]

    async def update(request: Request) -> Response:
        refused = served()
        if refused is not None:
            return refused
        change = await parsed(request, ThreadUpdate)
        if isinstance(change, Response):
            return change
        call = app.update_thread_state(  # type: ignore[attr-defined]
            request.path_params["session_id"],
            workspace_id=workspace,
            values=change.values,
            as_node=change.as_node,
        )
        return await answer(call)

    async def fork(request: Request) -> Response:
        refused = served()
        if refused is not None:
            return refused
        asked = await parsed(request, ThreadFork)
        if isinstance(asked, Response):
            return asked
        call = app.fork_thread(  # type: ignore[attr-defined]
            request.path_params["session_id"],
            workspace_id=workspace,
            execution_id=asked.execution_id,
            to_session_id=asked.to_session_id,
            to_execution_id=asked.to_execution_id,
        )
        return await answer(call)

    async def sessions(_: Request) -> Response:
        refused = served()
        if refused is not None:
            return refused

        async def listed() -> dict[str, Any]:
            return {"sessions": await app.sessions(workspace_id=workspace)}  # type: ignore[attr-defined]

        return await answer(listed())

    async def messages(request: Request) -> Response:
        refused = served()
        if refused is not None:
            return refused
        session_id = request.path_params["session_id"]

        async def listed() -> dict[str, Any]:
            found = await app.session_history(session_id, workspace_id=workspace)  # type: ignore[attr-defined]
            return {"session_id": session_id, "messages": found}

        return await answer(listed())

    return [
        Route(THREAD_STATE_PATH, state, methods=["GET"]),
        Route(THREAD_STATE_PATH, update, methods=["POST"]),
        Route(THREAD_FORK_PATH, fork, methods=["POST"]),
        Route(SESSIONS_PATH, sessions, methods=["GET"]),
        Route(SESSION_MESSAGES_PATH, messages, methods=["GET"]),
    ]
