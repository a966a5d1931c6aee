"""A governed model call's deltas as LangGraph `messages` chunks (issue 32): one per piece of text, and
merged they are the final message, or the message goes whole."""

from __future__ import annotations

from functools import reduce
from operator import add

import pytest
from langchain_core.messages import AIMessage

from agent_runtime.langgraph.message_chunks import message_chunks
from agent_runtime.protocol import LLMDelta, ToolCallDelta

pytestmark = pytest.mark.unit

FINAL = AIMessage(
    content="Sunny in Paris.",
    id="chatcmpl-1",
    tool_calls=[{"id": "call_1", "name": "get_weather", "args": {"city": "Paris, France"}}],
    usage_metadata={"input_tokens": 4, "output_tokens": 7, "total_tokens": 11},
    response_metadata={"finish_reason": "tool_calls", "model_name": "m"},
    additional_kwargs={"refusal": None},
)


def _merged(chunks: list) -> AIMessage:
    return reduce(add, chunks)


def test_each_piece_of_text_is_a_chunk_and_merged_they_are_the_final_message() -> None:
    deltas = [
        LLMDelta(index=0, id="chatcmpl-1", text="Sunny"),
        LLMDelta(index=1, text=" in", tool_calls=[ToolCallDelta(index=0, id="call_1", name="get_weather")]),
        LLMDelta(
            index=2,
            text=" Paris.",
            tool_calls=[ToolCallDelta(index=0, arguments='{"city": "Paris, France"}')],
        ),
        LLMDelta(index=3, last=True, finish_reason="tool_calls", usage={"input_tokens": 4}),
    ]
    chunks = message_chunks(deltas, FINAL)
    assert [c.content for c in chunks] == ["Sunny", " in", " Paris.", ""]
    merged = _merged(chunks)
    assert merged.content == FINAL.content and merged.id == FINAL.id
    assert [(c["id"], c["name"], c["args"]) for c in merged.tool_calls] == [
        ("call_1", "get_weather", {"city": "Paris, France"})
    ]
    assert merged.usage_metadata == FINAL.usage_metadata
    assert merged.response_metadata == FINAL.response_metadata


def test_deltas_that_do_not_give_the_final_message_send_it_whole() -> None:
    # A replayed step's one delta carries the text; a redacted piece that differs from the message.
    for deltas in ([], [LLMDelta(text="Sunny in")], [LLMDelta(text="Sunny in [REDACTED].")]):
        (whole,) = message_chunks(deltas, FINAL)
        assert whole.content == FINAL.content and whole.tool_calls[0]["args"] == {"city": "Paris, France"}
    blocks = AIMessage(content=[{"type": "text", "text": "hi"}], id="x")
    assert len(message_chunks([LLMDelta(text="hi")], blocks)) == 1
