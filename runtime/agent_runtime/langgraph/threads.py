"""Threads as LangGraph users know them: a session's state (`get_state` / `update_state`) and history.

The AER holds the checkpoint store, so it answers these for the OE, which authorizes the client (reading
a session is reading the Agent's executions; changing its state is a reviewer's right) and forwards. A
session is addressed only under its workspace-scoped key `session_id:workspace_id` (LG-06): the raw
`session_id` is never read, and threads a custom `app.resolve_thread_id` keys are not addressable here.
The graph is built as for a run (the entrypoint, with a RequestContext naming only the session), and
nothing runs: `aget_state` reads the checkpoint, `aupdate_state` writes one as LangGraph does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from agent_runtime.langgraph.agent import graph_checkpointer, is_compiled_graph, jsonable_state
from agent_runtime.langgraph.checkpoint_branch import copy_turn_start
from agent_runtime.langgraph.messages import to_platform_messages
from agent_runtime.langgraph.model_keys import set_placeholder_keys
from agent_runtime.langgraph.thread_id import scoped_thread_id
from agent_runtime.sdk.context import RequestContext, entrypoint_scope, run_scope


class ThreadApp(Protocol):
    """What the thread routes need of the LangGraph `App` (runtime.py, which calls them): a Protocol, so this
    module does not import the App back (issue 42: no import cycle)."""

    @property
    def has_thread_resolver(self) -> bool: ...

    @property
    def entrypoint_function(self) -> Callable[..., Any] | None: ...


logger = logging.getLogger(__name__)
READ_EXECUTION_ID = "thread-state"
MESSAGES_CHANNEL = "messages"


class ThreadUnavailable(Exception):
    """The App cannot answer for this thread; `status` is the HTTP status, the message says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _graph(app: ThreadApp, *, session_id: str | None, workspace_id: str) -> tuple[Any, dict[str, Any]]:
    if app.has_thread_resolver:
        raise ThreadUnavailable(
            409, "this Agent keys its threads with app.resolve_thread_id: only session-keyed threads are here"
        )
    context = RequestContext(execution_id=READ_EXECUTION_ID, session_id=session_id, workspace_id=workspace_id)
    entry = app.entrypoint_function
    if entry is None:
        raise ThreadUnavailable(404, "this Agent has no entrypoint")
    try:
        with run_scope(context, oe=None), entrypoint_scope():
            set_placeholder_keys()
            graph = entry(context)
    except Exception as exc:
        logger.exception("the entrypoint failed to build the graph for a thread route")
        raise ThreadUnavailable(
            500, f"the entrypoint raised {type(exc).__name__} building the graph; see the AER log"
        ) from None
    if not is_compiled_graph(graph) or graph_checkpointer(graph) is None:
        raise ThreadUnavailable(
            404, "this Agent's graph keeps no checkpoints: compile it with checkpointer=app.checkpointer()"
        )
    config = {"configurable": {"thread_id": scoped_thread_id(session_id or "", workspace_id)}}
    return graph, config


def snapshot_view(session_id: str, state: Any) -> dict[str, Any]:
    """A `StateSnapshot` as JSON: values (messages as platform dicts), what runs next, pending interrupts."""
    configurable = (getattr(state, "config", None) or {}).get("configurable") or {}
    return {
        "session_id": session_id,
        "values": jsonable_state(state.values or {}),
        "next": [str(node) for node in state.next or ()],
        "interrupts": [
            {"id": str(item.id), "value": jsonable_state(item.value)} for item in state.interrupts or ()
        ],
        "checkpoint_id": configurable.get("checkpoint_id"),
        "created_at": state.created_at,
    }


async def thread_state(app: ThreadApp, *, session_id: str, workspace_id: str) -> dict[str, Any]:
    graph, config = _graph(app, session_id=session_id, workspace_id=workspace_id)
    state = await graph.aget_state(config)
    if state.created_at is None:
        raise ThreadUnavailable(404, f"no thread for session {session_id!r} in this workspace")
    return snapshot_view(session_id, state)


async def update_thread_state(
    app: ThreadApp, *, session_id: str, workspace_id: str, values: Mapping[str, Any], as_node: str | None
) -> dict[str, Any]:
    graph, config = _graph(app, session_id=session_id, workspace_id=workspace_id)
    if as_node is not None and as_node not in graph.nodes:
        known = ", ".join(sorted(str(name) for name in graph.nodes if not str(name).startswith("__")))
        raise ThreadUnavailable(400, f"as_node: the graph has no node {as_node!r}; it has {known}")
    await graph.aupdate_state(config, dict(values), as_node=as_node)
    return snapshot_view(session_id, await graph.aget_state(config))


async def session_history(app: ThreadApp, *, session_id: str, workspace_id: str) -> list[dict[str, Any]]:
    """The messages of the session's thread, read through the graph's own channels: a channel that keeps
    deltas (deepagents' `messages`) is whole only so (`session_messages` reads the saved value as is)."""
    graph, config = _graph(app, session_id=session_id, workspace_id=workspace_id)
    state = await graph.aget_state(config)
    values = state.values if isinstance(state.values, Mapping) else {}
    return [dict(m) for m in to_platform_messages(list(values.get(MESSAGES_CHANNEL) or []))]


async def sessions(app: ThreadApp, *, workspace_id: str, limit: int = 200) -> list[str]:
    """The sessions of this workspace with a thread, newest checkpoint first (scoped keys only)."""
    graph, _ = _graph(app, session_id=None, workspace_id=workspace_id)
    checkpointer = graph_checkpointer(graph)
    assert checkpointer is not None
    suffix = f":{workspace_id}"
    found: list[str] = []
    async for item in checkpointer.alist(None):
        thread = str((item.config.get("configurable") or {}).get("thread_id") or "")
        ns = str((item.config.get("configurable") or {}).get("checkpoint_ns") or "")
        session = thread[: -len(suffix)] if thread.endswith(suffix) else ""
        if ns == "" and session and session not in found:
            found.append(session)
            if len(found) >= limit:
                break
    return found


async def fork_thread(
    app: ThreadApp,
    *,
    session_id: str,
    workspace_id: str,
    execution_id: str,
    to_session_id: str,
    to_execution_id: str,
) -> dict[str, Any]:
    """Session fork (LG-18): the session's thread up to `execution_id`'s turn start, copied into
    `to_session_id`'s thread for the OE's fork execution `to_execution_id` to replay from."""
    graph, config = _graph(app, session_id=session_id, workspace_id=workspace_id)
    checkpointer = graph_checkpointer(graph)
    assert checkpointer is not None
    target = scoped_thread_id(to_session_id, workspace_id)
    if await checkpointer.aget_tuple({"configurable": {"thread_id": target}}) is not None:
        raise ThreadUnavailable(409, f"session {to_session_id!r} already has a thread: fork into a new one")
    try:
        checkpoint_id = await copy_turn_start(
            checkpointer,
            thread_id=config["configurable"]["thread_id"],
            execution_id=execution_id,
            to_thread_id=target,
            to_execution_id=to_execution_id,
        )
    except LookupError as exc:
        raise ThreadUnavailable(404, str(exc)) from None
    return {"session_id": to_session_id, "forked_from": session_id, "checkpoint_id": checkpoint_id}
