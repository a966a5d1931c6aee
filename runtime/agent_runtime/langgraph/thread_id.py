"""The checkpoint thread id of a run (LG-05): `session_id:workspace_id`, or the agent's own resolver.

- The default is `f"{session_id}:{workspace_id}"`; an execution without a session is its own thread
  (`f"{execution_id}:{workspace_id}"`), so its resume finds its checkpoint.
- An empty workspace gives `"sess:"`, legitimate only where no APP_ID scopes the runtime (local runs and
  tests); the raw `session_id` is never a key the platform writes or reads.
- A resolver registered with `app.resolve_thread_id(fn)` is used verbatim, for new and resumed runs alike.
  It must rebuild the same key from the RequestContext every time.
- A managed runtime (REQUIRE_PROJECT_SCOPED_DB) without APP_ID fails closed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agent_runtime.contract import APP_ID_ENV
from agent_runtime.langgraph.checkpointer import CheckpointScopeError, scope_refusal
from agent_runtime.sdk.context import RequestContext

ThreadIdResolver = Callable[[RequestContext], str]
MAX_THREAD_ID_LENGTH = 1024


class ThreadIdError(ValueError):
    """A resolver returned something that cannot be a thread id; the message says what and the fix."""


def scoped_thread_id(session_id: str, workspace_id: str) -> str:
    """The platform's key for one session in one workspace (also what the history reads, LG-06)."""
    return f"{session_id}:{workspace_id}"


def default_thread_id(context: RequestContext, *, env: Mapping[str, str]) -> str:
    refusal = scope_refusal(env)
    if refusal is not None:
        raise CheckpointScopeError(refusal)
    app_id = env.get(APP_ID_ENV, "").strip()
    workspace = context.workspace_id
    if app_id and workspace != app_id:
        # The AER refuses such a request already; a thread id must never be built from one.
        raise CheckpointScopeError(
            f"the execution names workspace {workspace!r} but this runtime's {APP_ID_ENV} is {app_id!r}"
        )
    return scoped_thread_id(context.session_id or context.execution_id, workspace)


def resolve_thread_id(
    context: RequestContext, *, resolver: ThreadIdResolver | None, env: Mapping[str, str]
) -> str:
    """The run's thread id: the resolver's value verbatim, else the default."""
    if resolver is None:
        return default_thread_id(context, env=env)
    refusal = scope_refusal(env)
    if refusal is not None:
        raise CheckpointScopeError(refusal)
    value = resolver(context)
    name = getattr(resolver, "__name__", "the resolver")
    if not isinstance(value, str) or not value:
        raise ThreadIdError(
            f"app.resolve_thread_id: {name} returned {type(value).__name__} {value!r}; return a non-empty "
            "str built from the RequestContext (for example f'{ctx.session_id}__{ctx.user_id}')"
        )
    if len(value) > MAX_THREAD_ID_LENGTH:
        raise ThreadIdError(
            f"app.resolve_thread_id: {name} returned a {len(value)}-character key; keep it within "
            f"{MAX_THREAD_ID_LENGTH}"
        )
    return value
