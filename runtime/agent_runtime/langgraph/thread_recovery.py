"""A thread survives any failed turn (issue 31, finding 3).

A turn that fails (a tenant error in a node or hook, a platform failure in the tools step, a rejected
breakpoint) can leave the thread's last AI message with tool calls that never got their ToolMessage.
LangGraph itself drops a failed super-step's pending tasks when the next turn brings input, but the
dangling calls stay in the state, and `create_react_agent` (like every provider) refuses such a history:
every later turn of the session failed. So a new turn's input starts with one ToolMessage per unanswered
call saying it was stopped and its outcome is unknown (stopped_tool_calls.py): the model is told nothing
false, and the thread goes on. A rejected hold discards its pending task outright
(`discard_pending_tasks`), so nothing of it runs later.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from langgraph.graph import END

from agent_runtime.langgraph.stopped_tool_calls import stopped_answers

logger = logging.getLogger(__name__)
MESSAGES_KEY = "messages"


async def recovered_input(graph: Any, config: dict[str, Any], value: Any) -> Any:
    """The new turn's input, led by a stopped-call answer for each tool call the thread left unanswered."""
    if not isinstance(value, Mapping) or not isinstance(value.get(MESSAGES_KEY), list):
        return value
    state = await graph.aget_state(config)
    values = state.values if isinstance(state.values, Mapping) else {}
    stopped = stopped_answers(list(values.get(MESSAGES_KEY) or []))
    if not stopped:
        return value
    logger.info("answered %d tool call(s) an earlier turn on this thread left unanswered", len(stopped))
    return {**value, MESSAGES_KEY: [*stopped, *value[MESSAGES_KEY]]}


async def discard_pending_tasks(graph: Any, config: dict[str, Any]) -> tuple[str, ...]:
    """Discard the tasks the thread's latest checkpoint still has to run; returns their node names."""
    state = await graph.aget_state(config)
    pending = tuple(str(node) for node in (state.next or ()))
    if pending:
        await graph.aupdate_state(config, None, as_node=END)
    return pending
