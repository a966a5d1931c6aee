"""A tool registered with `app.tool` is governed wherever the graph runs it (issue 31, finding 1).

LangGraph's docs hand the same tool object to `create_react_agent(model, tools=[...])` or `ToolNode` that
the team registered. So `app.tool` makes both the object it returns and the object it was given the
governed tool: a LangChain tool whose every call goes through the OE (policy, audit, review, idempotency
key), whatever code calls it. The body the App registered runs only inside a governed call (a copy the
ToolSpec holds); the given tool's own `func` / `coroutine`, called directly during a run outside a
governed call, is a platform failure naming the tool and the fix.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from agent_runtime.langgraph.durable_tools import GovernedTool
from agent_runtime.sdk.calls import current_call
from agent_runtime.sdk.context import active_run
from agent_runtime.sdk.errors import PlatformFailure


def ungoverned_body_failure(tool: str) -> PlatformFailure | None:
    """The failure for a registered body run now, or None where it may run (a governed call, no run)."""
    run = active_run()
    if run is None or run.context.construction or current_call() is not None:
        return None
    message = (
        f"tool {tool!r}'s body ran outside a governed call, so the OE never saw it (no policy, audit, "
        "approval or idempotency key): hand the graph the tool app.tool returned (or "
        "app.langchain_tools(ctx)) and let LangGraph call it"
    )
    run.platform_failure = run.platform_failure or message
    return PlatformFailure(message)


def _guarded(body: Callable[..., Any] | None, *, tool: str) -> Callable[..., Any] | None:
    if body is None:
        return None
    if inspect.iscoroutinefunction(body):

        @functools.wraps(body)
        async def guarded_async(*args: Any, **kwargs: Any) -> Any:
            failure = ungoverned_body_failure(tool)
            if failure is not None:
                raise failure
            return await body(*args, **kwargs)

        return guarded_async

    @functools.wraps(body)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        failure = ungoverned_body_failure(tool)
        if failure is not None:
            raise failure
        return body(*args, **kwargs)

    return guarded


def govern_in_place(tool: BaseTool, governed: GovernedTool) -> BaseTool:
    """Make `tool` itself call through the OE (its invoke/ainvoke are the governed tool's) and return it."""
    # Instance attributes shadow the class's methods; the name, description and schema stay the tool's own.
    for method in ("ainvoke", "invoke", "_arun", "_run"):
        object.__setattr__(tool, method, getattr(governed, method))
    if isinstance(tool, StructuredTool):
        object.__setattr__(tool, "func", _guarded(tool.func, tool=tool.name))
        object.__setattr__(tool, "coroutine", _guarded(tool.coroutine, tool=tool.name))
    return tool
