"""Session history from checkpoints, scoped reads only (LG-06).

A session is read only under its workspace-scoped key `session_id:workspace_id`; the raw `session_id` (a
legacy, unscoped key any workspace could have written in a shared store) is never queried. Keys from a
custom `app.resolve_thread_id` are invisible here by design (S2).
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from agent_runtime.langgraph.messages import to_platform_messages
from agent_runtime.langgraph.thread_id import scoped_thread_id
from agent_runtime.llm.messages import Message


async def session_messages(
    checkpointer: BaseCheckpointSaver, session_id: str, *, workspace_id: str, channel: str = "messages"
) -> list[Message]:
    """The messages of the session's latest checkpoint in this workspace, as platform dicts."""
    if not session_id:
        raise ValueError("session_id: must be a non-empty string")
    thread_id = scoped_thread_id(session_id, workspace_id)
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    found = await checkpointer.aget_tuple(config)
    if found is None:
        return []
    messages = found.checkpoint.get("channel_values", {}).get(channel) or []
    return to_platform_messages(messages)
