"""The ReAct graph the stream-mode test runs both through the platform and bare in-process (issue 32):
LangGraph's prebuilt agent with a post-model hook that reports progress through `get_stream_writer()`, so
every stream mode (`values`, `updates`, `messages`, `custom`) has chunks to compare."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.config import get_stream_writer
from langgraph.graph import MessagesState
from langgraph.prebuilt import create_react_agent


def report_progress(state: MessagesState) -> dict[str, Any]:
    last = state["messages"][-1]
    get_stream_writer()({"progress": "model_answered", "tool_calls": len(getattr(last, "tool_calls", []))})
    return {}


def streamed_react(model: Any, tools: Sequence[Any], *, checkpointer: Any) -> Any:
    return create_react_agent(
        model, tools=list(tools), checkpointer=checkpointer, post_model_hook=report_progress
    )
