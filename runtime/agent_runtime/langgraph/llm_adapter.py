"""The Tool Pod's side of a LangChain chat model: the platform model interface over a BaseChatModel.

`/invoke_llm` calls a registered model as `ainvoke(messages, tools=..., stream=..., **options)` with
platform message dicts and expects a platform AI message dict back. This adapter translates both ways and
lets the LangChain model do the provider call (with its own client, retries and key handling), in the
Tool Pod, where the key is.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, message_chunk_to_message

from agent_runtime.langgraph.messages import from_platform_messages, to_platform
from agent_runtime.llm.messages import Message


def is_langchain_chat_model(model: object) -> bool:
    return isinstance(model, BaseChatModel)


class LangChainModelAdapter:
    """Wraps a LangChain chat model so the Tool Pod can run it like the platform's own models."""

    def __init__(self, model: BaseChatModel) -> None:
        if not isinstance(model, BaseChatModel):
            raise TypeError(f"expected a LangChain BaseChatModel, got {type(model).__name__}")
        self.model = model

    def __repr__(self) -> str:
        # The model's repr can hold its settings; its type is enough to name it in a log.
        return f"LangChainModelAdapter({type(self.model).__name__})"

    async def ainvoke(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        stream: bool = False,
        **options: Any,
    ) -> Message:
        """Run the model once on platform messages; return the final AI message as a platform dict."""
        runnable, inputs = self._prepared(messages, tools=tools, options=options)
        if stream:
            chunks = [chunk async for chunk in runnable.astream(inputs, **options)]
            if not chunks:
                raise ValueError("the model streamed no chunk")
            merged = functools.reduce(operator.add, chunks)
            message = message_chunk_to_message(merged) if isinstance(merged, AIMessageChunk) else merged
        else:
            message = await runnable.ainvoke(inputs, **options)
        if not isinstance(message, AIMessage):
            raise TypeError(f"the model returned a {type(message).__name__}, not an AIMessage")
        return to_platform(message)

    async def astream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        """The model's stream (issue 32): an `llm_chunk` event per LangChain chunk as it arrives, then the
        final AI message as a platform dict (the chunks merged), as the chat-completions client streams."""
        runnable, inputs = self._prepared(messages, tools=tools, options=options)
        merged: Any = None
        async for chunk in runnable.astream(inputs, **options):
            merged = chunk if merged is None else merged + chunk
            if isinstance(chunk, AIMessageChunk):
                yield _chunk_event(chunk)
        if merged is None:
            raise ValueError("the model streamed no chunk")
        message = message_chunk_to_message(merged) if isinstance(merged, AIMessageChunk) else merged
        if not isinstance(message, AIMessage):
            raise TypeError(f"the model returned a {type(message).__name__}, not an AIMessage")
        yield to_platform(message)

    def _prepared(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None,
        options: dict[str, Any],
    ) -> tuple[Any, Any]:
        tool_choice = options.pop("tool_choice", None)
        runnable: Any = self.model
        if tools:
            runnable = self.model.bind_tools([dict(tool) for tool in tools], tool_choice=tool_choice)
        elif tool_choice is not None:
            options["tool_choice"] = tool_choice
        return runnable, from_platform_messages(messages)


def _chunk_event(chunk: AIMessageChunk) -> dict[str, Any]:
    """A LangChain chunk as the platform's `llm_chunk` event (text content, tool-call pieces)."""
    content = chunk.content if isinstance(chunk.content, str) else ""
    return {
        "type": "llm_chunk",
        "id": chunk.id,
        "content": content,
        "additional_kwargs": {},
        "tool_call_chunks": [
            {
                "index": piece.get("index") or 0,
                "id": piece.get("id"),
                "name": piece.get("name"),
                "args": piece.get("args") or "",
            }
            for piece in chunk.tool_call_chunks
        ],
    }
