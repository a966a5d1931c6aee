"""A governed model call's deltas as LangChain message chunks (issue 32): LangGraph's `messages` stream mode
gives one chunk per piece of the model's answer, as it does for a model run in-process.

The OE hands the AER a streamed call's deltas (redacted, in order, as its `llm_delta` events carried them)
with the final message. Each delta's text becomes an `AIMessageChunk`; one last chunk carries the tool
calls, whole, and what only the final message has (usage, response metadata, extra fields). The chunks
are used only when, merged as LangChain merges them, they give back the final message (content, tool
calls, id, usage, metadata): otherwise (a content made of blocks, deltas whose text differs) the message
goes as one chunk. So the state the graph saves is the final message either way, and a replayed run's
state and fingerprints stay what the first run's were.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk

from agent_runtime.protocol import LLMDelta


def _whole(message: AIMessage) -> list[AIMessageChunk]:
    return [
        AIMessageChunk(
            content=message.content,
            id=message.id,
            name=message.name,
            additional_kwargs=message.additional_kwargs,
            response_metadata=message.response_metadata,
            tool_call_chunks=[
                tool_call_chunk(name=c["name"], args=_args_text(c["args"]), id=c["id"], index=i)
                for i, c in enumerate(message.tool_calls)
            ],
            usage_metadata=message.usage_metadata,
        )
    ]


def _args_text(args: Any) -> str:

    return json.dumps(args, ensure_ascii=False)


def _pieces(deltas: Sequence[LLMDelta], message: AIMessage) -> list[AIMessageChunk]:
    # One chunk per piece of text; the tool calls whole in the last chunk (a chat front end shows text as
    # it comes; a call's arguments are of use only whole), with what only the final message has.
    chunks = [AIMessageChunk(content=d.text, id=message.id) for d in deltas if d.text]
    last = _whole(message)[0]
    chunks.append(
        AIMessageChunk(
            content="",
            id=message.id,
            name=message.name,
            additional_kwargs=message.additional_kwargs,
            response_metadata=message.response_metadata,
            tool_call_chunks=last.tool_call_chunks,
            usage_metadata=message.usage_metadata,
        )
    )
    return chunks


def _same(merged: AIMessageChunk, message: AIMessage) -> bool:
    calls = [(c["id"], c["name"], c["args"]) for c in merged.tool_calls]
    return (
        merged.content == message.content
        and calls == [(c["id"], c["name"], c["args"]) for c in message.tool_calls]
        and not merged.invalid_tool_calls
        and not message.invalid_tool_calls
        and merged.id == message.id
        and merged.usage_metadata == message.usage_metadata
        and merged.response_metadata == message.response_metadata
        and merged.additional_kwargs == message.additional_kwargs
    )


def message_chunks(deltas: Sequence[LLMDelta], message: AIMessage) -> list[AIMessageChunk]:
    """The chunks to stream for `message`: one per delta and a last one, or the whole message as one."""
    if not deltas or not isinstance(message.content, str):
        return _whole(message)
    chunks = _pieces(deltas, message)
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk
    return chunks if _same(merged, message) else _whole(message)
