"""A reviewer's edit reaches the graph's state: the AI message's tool call carries the executed arguments.

When the OE ran a call with arguments a reviewer edited, the tool's answer is a LangGraph `Command` that
writes the ToolMessage and the AI message that asked for the call, with that call's `args` replaced by
the ones that ran (the `messages` reducer replaces a message by its id, in place). The arguments the model
asked for stay in the OE's audit and in the message's `response_metadata["agent_engine"]`, which no
provider is sent. So the checkpoint, and what the model is shown next, hold what actually ran.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.config import get_config
from langgraph.types import Command

logger = logging.getLogger(__name__)

# LangGraph's configurable key for reading the running task's state (langgraph._internal._constants).
_READ_KEY = "__pregel_read"
MESSAGES_KEY = "messages"
METADATA_KEY = "agent_engine"


def edited_ai_message(
    messages: Sequence[Any], *, tool_call_id: str, executed: Mapping[str, Any]
) -> AIMessage | None:
    """The AI message that asked for `tool_call_id`, that call's args replaced by `executed` (or None)."""
    for message in reversed(messages):
        if not isinstance(message, AIMessage):
            continue
        calls = list(message.tool_calls)
        index = next((i for i, call in enumerate(calls) if call.get("id") == tool_call_id), None)
        if index is None:
            continue
        requested = calls[index].get("args")
        calls[index] = {**calls[index], "args": dict(executed)}
        metadata = dict(message.response_metadata or {})
        ours = dict(metadata.get(METADATA_KEY) or {})
        ours["requested_args"] = {**dict(ours.get("requested_args") or {}), tool_call_id: requested}
        metadata[METADATA_KEY] = ours
        return message.model_copy(update={"tool_calls": calls, "response_metadata": metadata})
    return None


def _state_messages() -> list[BaseMessage] | None:
    try:
        read = (get_config().get("configurable") or {}).get(_READ_KEY)
        value = read(MESSAGES_KEY) if callable(read) else None
    except Exception:
        return None
    return list(value) if isinstance(value, list) else None


def edit_update(
    tool_call: Mapping[str, Any], *, content: str, executed: Mapping[str, Any], tool: str
) -> Command[Any] | None:
    """The Command a governed tool answers with when its call ran with edited arguments, if it can."""
    call_id = tool_call.get("id")
    messages = _state_messages()
    if not isinstance(call_id, str) or messages is None:
        logger.warning("tool %s ran with edited arguments the graph's state cannot show", tool)
        return None
    edited = edited_ai_message(messages, tool_call_id=call_id, executed=executed)
    if edited is None:
        return None
    answer = ToolMessage(content=content, tool_call_id=call_id, name=tool)
    return Command(update={MESSAGES_KEY: [answer, edited]})
