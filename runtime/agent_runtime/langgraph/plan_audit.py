"""A deep agent's plan through the OE (issue 39): each `write_todos` call is a governed step of its own.

deepagents' `write_todos` only sets the graph's `todos` state; nothing leaves the AER. Without a step of
its own the plan reached the audit only inside the next model call's arguments, which the audit cuts at
16 KB, so a long conversation's plan was not to be seen. `PlanAudit` (a LangChain agent middleware the
SDK adds to the lead and to each declared subagent) first sends the call to the OE as the local tool
`write_todos` (`is_local`: its body runs in the AER and does nothing but say it was recorded), so the
audit holds the todos as that step's arguments and names the agent writing them, a policy may name
`write_todos` like any tool (deny, or hold for review), and a replay answers the step from the cache.
Then deepagents' own tool updates the state. A denied plan is not written: the model reads why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage

from agent_runtime.langgraph.durable_tools import tool_error_text
from agent_runtime.langgraph.subagents import calling_agent
from agent_runtime.langgraph.suspend import current_graph_run, surface_suspension
from agent_runtime.langgraph.sync_calls import run_from_worker_thread
from agent_runtime.sdk.errors import PolicyDeniedException, SuspendRequested, ToolExecutionError
from agent_runtime.sdk.secure import call_tool

PLAN_TOOL = "write_todos"


def register(app: Any) -> None:
    """The local tool the OE audits each plan as (registered once, by `app.enable_deep_agents()`)."""

    def write_todos(todos: list[dict[str, Any]]) -> dict[str, Any]:
        """Record the agent's plan (the todo list it writes) in the audit."""
        return {"recorded": len(todos)}

    app.tool(write_todos, is_local=True)


async def _record(args: dict[str, Any]) -> str | None:
    """None when the OE recorded the plan; else why not (the model reads it)."""
    try:
        with calling_agent():  # the subagent planning, for the audit (subagents.py)
            await call_tool(PLAN_TOOL, {"todos": list(args.get("todos") or [])})
    except SuspendRequested as signal:
        surface_suspension(signal)  # held for review: the graph pauses here, as for any held call
    except (ToolExecutionError, PolicyDeniedException) as exc:
        return f"{PLAN_TOOL}: {tool_error_text(exc)}"
    return None


def _refused(request: Any, text: str) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(content=text, tool_call_id=call.get("id") or "", name=PLAN_TOOL, status="error")


class PlanAudit(AgentMiddleware):  # type: ignore[type-arg]
    """Send each `write_todos` call to the OE before deepagents applies it."""

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        if request.tool_call.get("name") != PLAN_TOOL:
            return await handler(request)
        problem = await _record(dict(request.tool_call.get("args") or {}))
        return _refused(request, problem) if problem is not None else await handler(request)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if request.tool_call.get("name") != PLAN_TOOL:
            return handler(request)
        run = current_graph_run()
        args = dict(request.tool_call.get("args") or {})
        problem = run_from_worker_thread(
            lambda: _record(args), loop=run.loop if run is not None else None, what=PLAN_TOOL
        )
        return _refused(request, problem) if problem is not None else handler(request)
