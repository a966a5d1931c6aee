"""The Tool Pod's adapter over a real LangChain chat model (ChatOpenAI) against the loopback peer."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_openai import ChatOpenAI

from agent_runtime.langgraph import LangChainModelAdapter, from_platform
from agent_runtime.llm import normalize_messages
from tests.integration.loop.harness import LLM_KEY
from tests.providers.llm_peer import RunningLLMPeer, Turn

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a word up.",
            "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
        },
    }
]
MESSAGES = [{"type": "system", "content": "be brief"}, {"type": "human", "content": "look up 'tea'"}]


def _adapter(peer: RunningLLMPeer) -> LangChainModelAdapter:
    return LangChainModelAdapter(
        ChatOpenAI(base_url=peer.base_url, model="m", api_key=LLM_KEY, max_retries=0)
    )


def test_whole_and_streamed_answers_are_the_same_platform_message(llm_peer: RunningLLMPeer) -> None:
    adapter = _adapter(llm_peer)
    llm_peer.push(
        Turn.calls(("lookup", {"word": "tea"}), text="checking", id="cmpl-1"),
        Turn.calls(("lookup", {"word": "tea"}), text="checking", id="cmpl-1"),
    )

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        whole = await adapter.ainvoke(MESSAGES, tools=TOOLS, tool_choice="required")
        streamed = await adapter.ainvoke(MESSAGES, tools=TOOLS, stream=True)
        return whole, streamed

    whole, streamed = asyncio.run(both())
    for answer in (whole, streamed):
        assert answer["type"] == "ai" and answer["content"] == "checking"
        assert [(c["name"], c["args"]) for c in answer["tool_calls"]] == [("lookup", {"word": "tea"})]
        normalize_messages([answer])  # a valid platform message, as the OE caches it
        assert from_platform(answer).tool_calls[0]["name"] == "lookup"
    assert whole["tool_calls"][0]["id"] == streamed["tool_calls"][0]["id"]
    assert whole["usage_metadata"]["total_tokens"] > 0  # streamed usage is ChatOpenAI(stream_usage=True)'s
    first = llm_peer.requests[0].body
    assert first["tools"][0]["function"]["name"] == "lookup" and first["tool_choice"] == "required"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert llm_peer.requests[1].body.get("stream") is True
