"""A thread survives any failed turn (issue 31, finding 3).

A turn that fails (a platform failure, an error in a node, a rejected hold) leaves the thread's latest
checkpoint with the failed super-step's tasks still pending. LangGraph would run them again before the
next turn's input, so every later turn re-ran the failing node (and paid for its model call first). So a
new turn on a thread with pending tasks first discards them: `update_state(None, as_node=END)` writes a
checkpoint with nothing left to run. The messages stay as they were; a tool call left without its answer
is shown to the model as stopped, outcome unknown (stopped_tool_calls.py), never as a result.
"""

from __future__ import annotations

import logging
from typing import Any

from langgraph.graph import END

logger = logging.getLogger(__name__)


async def discard_pending_tasks(graph: Any, config: dict[str, Any]) -> tuple[str, ...]:
    """Discard the tasks the thread's latest checkpoint still has to run; returns their node names."""
    state = await graph.aget_state(config)
    pending = tuple(str(node) for node in (state.next or ()))
    if pending:
        await graph.aupdate_state(config, None, as_node=END)
        logger.info("discarded the pending %s of an earlier turn on this thread", ", ".join(pending))
    return pending
