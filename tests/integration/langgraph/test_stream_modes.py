"""LangGraph's stream modes through real OE, AER and Tool Pod processes (issue 32).

A ReAct graph (LangGraph's prebuilt agent with a post-model hook that writes through
`get_stream_writer()`, `tenant/lg_stream_graph.py`) is invoked with `stream_mode` on /invoke; the events
the OE's SSE route gives for that mode are compared, event by event and ids aside, with the chunks the same
graph gives run bare in this process (a plain `ChatOpenAI` against the same loopback peer, plain tools).
An attacker test: another Agent's runtime token cannot publish into this execution.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessageChunk
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from agent_runtime.langgraph.agent import jsonable_state
from agent_runtime.langgraph.stream_modes import chunk_json
from agent_runtime.oe.audit import redact_value
from agent_runtime.protocol import OE_GRAPH_STREAM_PATH
from tests.integration.langgraph.tenant.lg_stream_graph import streamed_react
from tests.integration.langgraph.test_langgraph_patterns import TENANT, PatternsPlatform, _bundle
from tests.integration.loop.harness import (
    AGENT,
    CLIENT_TOKEN,
    LLM_KEY,
    OTHER_TOKEN,
    RUNTIME_TOKEN,
    Platform,
    Tenant,
)
from tests.integration.loop.test_streaming import sse_events
from tests.integration.runtime.launched import CONNECTOR_SECRET
from tests.providers.llm_peer import RunningLLMPeer, Turn, running_llm_peer

pytestmark = pytest.mark.integration

MODES = ("values", "updates", "messages", "custom")
# What differs between two runs of one graph by construction: generated ids, run and checkpoint keys.
ID_KEYS = frozenset(
    {"id", "tool_call_id", "run_id", "thread_id", "checkpoint_ns", "langgraph_checkpoint_ns", "checkpoint_id"}
)


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city, written as 'city, country'."""
    return f"It's always sunny in {city}"


@tool
def book_table(restaurant: str, people: int) -> dict[str, Any]:
    """Book a table at a restaurant for a number of people."""
    return {"booked": restaurant, "people": people}


@pytest.fixture(scope="module")
def peer() -> Iterator[RunningLLMPeer]:
    with running_llm_peer(api_key=LLM_KEY) as running:
        yield running


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory, module_spawn: Any, peer: RunningLLMPeer) -> Platform:
    tenant = Tenant(
        entrypoint="lg_patterns:app",
        pythonpath=TENANT,
        bundle=_bundle,
        tool_env={"OPENAI_API_KEY": LLM_KEY, "ECHO_TOKEN": CONNECTOR_SECRET},
    )
    return PatternsPlatform(
        tmp=tmp_path_factory.mktemp("lg-stream-modes"),
        spawn=module_spawn,
        llm_base_url=peer.base_url,
        provider_url="http://127.0.0.1:9",
        tenant=tenant,
        policy={"requireApproval": ["book_table"]},
    ).start()


def _turns(**more: Any) -> tuple[Turn, Turn]:
    answer = Turn.answer("Sunny in Paris.", chunk_delay_s=more.get("chunk_delay_s", 0.0))
    return Turn.calls(("get_weather", {"city": "Paris, France"}), **more), answer


TASK = {"messages": [{"role": "user", "content": "weather in Paris?"}]}


# A `messages` chunk is compared on what the graph did (the message and where in the graph it came from),
# not on the model object's provenance: the AER's model is the platform's governed wrapper (LangSmith's
# `ls_*` keys, package versions), and ChatOpenAI streaming (as it does bare when `messages` is asked for)
# reports no usage and other metadata. So with `messages` asked for, every message is compared on these.
MESSAGE_FIELDS = ("type", "content", "name", "tool_calls", "tool_call_id", "status")
METADATA_FIELDS = ("langgraph_step", "langgraph_node", "langgraph_triggers", "langgraph_path")
MESSAGE_TYPES = frozenset({"ai", "human", "tool", "system"})


def compared(kind: str, data: Any, *, streamed_model: bool) -> Any:
    if kind == "messages":
        message, metadata = data
        data = [message, {k: metadata.get(k) for k in METADATA_FIELDS}]
    return [kind, ids_aside(messages_only(data) if streamed_model else data)]


def messages_only(value: Any) -> Any:
    if isinstance(value, dict) and value.get("type") in MESSAGE_TYPES:
        return {k: value.get(k) for k in MESSAGE_FIELDS}
    if isinstance(value, dict):
        return {k: messages_only(v) for k, v in value.items()}
    if isinstance(value, list):
        return [messages_only(item) for item in value]
    return value


def ids_aside(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ids_aside(v) for k, v in value.items() if k not in ID_KEYS}
    if isinstance(value, list):
        return [ids_aside(item) for item in value]
    return value


def _invoke(platform: Platform, modes: list[str]) -> str:
    body = {"agent": AGENT, "input": TASK, "session_id": f"streamed-{uuid.uuid4().hex[:12]}"}
    with platform.client() as client:
        response = client.post("/invoke", json={**body, "stream_mode": modes})
    assert response.status_code == 202, response.text
    return str(response.json()["execution_id"])


def through_platform(platform: Platform, modes: list[str], pieces: list[list[str]]) -> list[tuple[str, Any]]:
    """The events of each mode; a model message's `messages` chunks joined into one, their text pieces
    appended to `pieces` (one list per message)."""
    execution_id = _invoke(platform, modes)
    events = list(sse_events(platform, execution_id))
    assert events[-1][0] == "completed", events[-1]
    streamed = [(kind, record["data"]) for kind, record, _ in events if kind in MODES]
    assert all(data["truncated"] is False for _, data in streamed)
    out: list[tuple[str, Any]] = []
    for kind, data in streamed:
        chunk = data["data"]
        previous = out[-1] if out else None
        if kind == "messages" and previous is not None and previous[0] == "messages":
            (message, metadata), (before, before_metadata) = chunk, previous[1]
            if _one_model_call(before, before_metadata, message, metadata):
                joined = {**message, "content": before["content"] + message["content"]}
                joined["tool_calls"] = before.get("tool_calls") or message.get("tool_calls")
                out[-1] = (kind, [joined, metadata])
                if message["content"]:
                    pieces[-1].append(message["content"])
                continue
        if kind == "messages":
            pieces.append([chunk[0]["content"]] if chunk[0].get("content") else [])
        out.append((kind, chunk))
    return out


async def bare(peer: RunningLLMPeer, modes: list[str], pieces: list[list[str]]) -> list[tuple[str, Any]]:
    """The graph's own chunks, as JSON and as the client may see them (the OE's step-result redaction);
    a model message's token chunks joined per message, their text pieces appended to `pieces`."""
    async with httpx.AsyncClient() as http:  # a client of this loop: langchain's default one outlives it
        model = ChatOpenAI(
            model="loop-model", base_url=peer.base_url, api_key=LLM_KEY, max_retries=0, http_async_client=http
        )
        graph = streamed_react(model, [get_weather, book_table], checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        raw: list[tuple[str, Any]] = []
        async for mode, payload in graph.astream(TASK, config, stream_mode=modes):
            previous = raw[-1] if raw else None
            if mode == "messages" and previous is not None and _same_message(previous, payload):
                raw[-1] = (mode, (previous[1][0] + payload[0], previous[1][1]))
                if payload[0].content:
                    pieces[-1].append(payload[0].content)
                continue
            if mode == "messages":
                pieces.append([payload[0].content] if payload[0].content else [])
            raw.append((mode, payload))
    return [
        (mode, redact_value(chunk_json(mode, payload, jsonable=jsonable_state), secrets=()))
        for mode, payload in raw
    ]


def _same_message(previous: tuple[str, Any], payload: Any) -> bool:
    message = payload[0]
    return (
        previous[0] == "messages"
        and isinstance(message, AIMessageChunk)
        and isinstance(previous[1][0], AIMessageChunk)
        and _step(previous[1][1]) == _step(payload[1])
    )


def _step(metadata: dict[str, Any]) -> tuple[Any, Any]:
    return metadata.get("langgraph_step"), metadata.get("langgraph_node")


def _one_model_call(
    before: dict[str, Any], before_meta: dict[str, Any], message: dict[str, Any], meta: dict[str, Any]
) -> bool:
    """Chunks of one model call: AI chunks of one node in one super-step. (By id they are not: LangChain
    closes a stream with an empty chunk named after its run, and the platform's chunks carry the final
    message's id, which the replay cache needs kept.)"""
    return before.get("type") == message.get("type") == "ai" and _step(before_meta) == _step(meta)


@pytest.mark.parametrize("modes", [[mode] for mode in MODES] + [list(MODES)], ids="+".join)
def test_each_stream_mode_gives_the_bare_graphs_sequence(
    platform: Platform, peer: RunningLLMPeer, modes: list[str]
) -> None:
    # Paced, so each of the model's words is a piece of its own on both paths.
    peer.push(*_turns(chunk_delay_s=0.02))
    got_pieces: list[list[str]] = []
    platformed = through_platform(platform, modes, got_pieces)
    peer.push(*_turns(chunk_delay_s=0.02))
    want_pieces: list[list[str]] = []
    expected = asyncio.run(bare(peer, modes, want_pieces))
    assert [kind for kind, _ in platformed] == [kind for kind, _ in expected]
    # `messages` is per token through the platform too: the same text pieces, message by message.
    assert got_pieces == want_pieces
    if "messages" in modes:
        assert any(len(p) > 1 for p in got_pieces), got_pieces
    for index, (got, want) in enumerate(zip(platformed, expected, strict=True)):
        streamed_model = "messages" in modes
        assert compared(*got, streamed_model=streamed_model) == compared(
            *want, streamed_model=streamed_model
        ), f"event {index} ({got[0]}) differs"


def test_another_agents_runtime_token_cannot_publish_into_the_execution(
    platform: Platform, peer: RunningLLMPeer
) -> None:
    # The first model call waits, so the execution is running while both tokens try.
    peer.push(*_turns(delay_s=3.0))
    execution_id = _invoke(platform, ["custom"])
    chunk = {"execution_id": execution_id, "mode": "custom", "data": {"planted": "by-attacker"}}
    with httpx.Client(base_url=platform.oe_url, timeout=10) as client:
        deadline = time.monotonic() + 30
        while (
            client.get(
                f"/execution/{execution_id}", headers={"authorization": f"Bearer {CLIENT_TOKEN}"}
            ).json()["status"]
            != "running"
        ):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        attacker = client.post(
            OE_GRAPH_STREAM_PATH, json=chunk, headers={"authorization": f"Bearer {OTHER_TOKEN}"}
        )
        unasked = client.post(
            OE_GRAPH_STREAM_PATH,
            json={**chunk, "mode": "values", "data": {"planted": "not asked"}},
            headers={"authorization": f"Bearer {RUNTIME_TOKEN}"},
        )
        owner = client.post(
            OE_GRAPH_STREAM_PATH,
            json={**chunk, "data": {"planted": "by-owner"}},
            headers={"authorization": f"Bearer {RUNTIME_TOKEN}"},
        )
    assert attacker.status_code == 404, attacker.text
    assert unasked.status_code == 409 and "stream_mode" in unasked.text, unasked.text
    assert owner.status_code == 200, owner.text  # the control: the route does publish for its Agent
    events = list(sse_events(platform, execution_id))
    assert events[-1][0] == "completed"
    planted = [record["data"]["data"] for kind, record, _ in events if kind in MODES]
    assert {"planted": "by-owner"} in planted
    assert all(p.get("planted") not in ("by-attacker", "not asked") for p in planted)
    assert all(kind != "values" for kind, _, _ in events)


def test_astream_events_and_langgraphs_other_modes_are_refused_naming_what_to_ask_for(
    platform: Platform,
) -> None:
    """`stream_mode: "events"` (LangGraph's `astream_events`) is not offered: a 400 naming the field, the
    mode and the modes to ask for instead, never a run that streams nothing."""
    body = {"agent": AGENT, "input": TASK, "session_id": f"streamed-{uuid.uuid4().hex[:12]}"}
    with platform.client() as client:
        for modes in ("events", ["messages", "events"], ["debug"]):
            response = client.post("/invoke", json={**body, "stream_mode": modes})
            assert response.status_code == 400, response.text
            (problem,) = response.json()["detail"]
            assert problem["field"] == "stream_mode", problem
            assert "is not offered" in problem["problem"] and "messages" in problem["problem"], problem
        assert "astream_events" in client.post("/invoke", json={**body, "stream_mode": "events"}).text
        executions = client.get("/executions", params={"agent": AGENT}).json()
    assert not any(e.get("session_id") == body["session_id"] for e in executions.get("items", []))
