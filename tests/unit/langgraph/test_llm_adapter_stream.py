"""A LangChain model registered with `app.llm` streams through the Tool Pod as the platform's client does."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from agent_runtime.langgraph.llm_adapter import LangChainModelAdapter
from agent_runtime.llm_delta import DeltaStream, joined
from agent_runtime.redaction import redactor_for

pytestmark = pytest.mark.unit


def test_astream_yields_chunk_events_then_the_final_message_and_the_deltas_join_to_it() -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage(content="hello big streaming world")]))

    async def run() -> list[dict[str, object]]:
        adapter = LangChainModelAdapter(model)
        return [event async for event in adapter.astream([{"type": "human", "content": "hi"}])]

    events = asyncio.run(run())
    chunks, final = events[:-1], events[-1]
    assert len(chunks) > 3 and all(event["type"] == "llm_chunk" for event in chunks)
    assert final["type"] == "ai" and final["content"] == "hello big streaming world"
    stream = DeltaStream(redactor_for([]), step=1)
    deltas = [d for d in (stream.chunk(event) for event in chunks) if d is not None]
    deltas.append(stream.end_of(final))
    assert joined(deltas)["text"] == final["content"]
