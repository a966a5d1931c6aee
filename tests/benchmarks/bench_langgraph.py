"""The LangGraph SDK: what the platform adds per LangGraph super-step, and checkpoint save/load per backend.

1. Super-steps. One ReAct graph (an agent node with LangChain's ChatOpenAI, LangGraph's ToolNode with a
   `noop` tool; a turn is three super-steps: model -> tools -> model), each node timed from inside the
   graph. Baseline, same run: the graph run bare in this process (ChatOpenAI straight to the loopback
   chat-completions peer, the tool's body in-process, InMemorySaver). Governed: the same graph built by
   `agent_runtime.langgraph.App` and run by real AER, OE (SQLite) and Tool Pod processes (the model runs
   in the Tool Pod behind the OE, the tool in the Tool Pod, the platform checkpointer over memory).
2. Checkpoints. `aput` and `aget_tuple` p50 of the platform checkpointer on memory, SQLite (a file) and
   MongoDB (FerretDB on SQLite), against the backend saver called directly in the same run.

This module is also the governed run's tenant (AGENT_ENTRYPOINT=tests.benchmarks.bench_langgraph:app).
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import httpx
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from agent_runtime.langgraph import App, PlatformCheckpointer, checkpoint_settings
from agent_runtime.sdk import RequestContext
from tests.benchmarks.bench_oe import CLIENT_TOKEN, Stack
from tests.benchmarks.bench_toolpod import _percentile
from tests.conftest import REPO_ROOT, free_port, wait_for_port

AGENT = "bench/agent"
TURNS = 30
WARMUP_TURNS = 3
CHECKPOINT_ROUNDS = 200


class TimedState(MessagesState):
    timings: Annotated[list[list[Any]], operator.add]


def build_graph(model: Any, tools: list[BaseTool], *, checkpointer: BaseCheckpointSaver | None) -> Any:
    """The graph both runs use: each node reports how long its super-step took."""
    bound = model.bind_tools(tools)
    tool_node = ToolNode(tools)

    async def agent(state: TimedState) -> dict[str, Any]:
        started = time.perf_counter()
        answer = await bound.ainvoke(state["messages"])
        return {"messages": [answer], "timings": [["model", time.perf_counter() - started]]}

    async def tools_step(state: TimedState) -> dict[str, Any]:
        started = time.perf_counter()
        out = await tool_node.ainvoke(state)
        return {**out, "timings": [["tools", time.perf_counter() - started]]}

    graph = StateGraph(TimedState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools_step)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def _chat(base_url: str) -> ChatOpenAI:
    return ChatOpenAI(base_url=base_url, model="bench", api_key=lambda: "bench-key", max_retries=0)


# The governed tenant ---------------------------------------------------------------------------------

app = App(app_name="bench-langgraph")


@app.tool
async def noop(item_id: str) -> dict[str, str]:
    """Return the argument unchanged."""
    return {"item_id": item_id}


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    model = app.llm(_chat(os.environ["AGENTIC_LLM_BASE_URL"]), llm_id="main")
    return build_graph(model, app.langchain_tools(ctx, names=["noop"]), checkpointer=app.checkpointer())


# Super-steps ----------------------------------------------------------------------------------------


@tool("noop")
async def bare_noop(item_id: str) -> dict[str, str]:
    """Return the argument unchanged."""
    return {"item_id": item_id}


def _turn_input(turn: int) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"item-{turn}"}]}


async def _bare_turns(peer_url: str, turns: int, *, warmup: int) -> dict[str, list[float]]:
    graph = build_graph(_chat(peer_url), [bare_noop], checkpointer=InMemorySaver())
    timings: dict[str, list[float]] = {"model": [], "tools": []}
    for turn in range(-warmup, turns):
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        result = await graph.ainvoke(_turn_input(turn), config)
        for kind, seconds in result["timings"] if turn >= 0 else ():
            timings[kind].append(seconds)
    return timings


async def _governed_turns(oe_port: int, turns: int, *, warmup: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {"model": [], "tools": []}
    headers = {"authorization": f"Bearer {CLIENT_TOKEN}"}
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{oe_port}", headers=headers, timeout=60
    ) as client:
        for turn in range(-warmup, turns):
            response = await client.post("/invoke", json={"agent": AGENT, "input": _turn_input(turn)})
            execution_id = response.json()["execution_id"]
            while True:
                view = (await client.get(f"/execution/{execution_id}")).json()
                if view["status"] in ("completed", "failed"):
                    break
                await asyncio.sleep(0.01)
            if view["status"] != "completed":
                raise RuntimeError(f"governed turn failed: {view.get('error')}")
            for kind, seconds in view["result"]["timings"] if turn >= 0 else ():
                timings[kind].append(seconds)
    return timings


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.3f} ms"


def _super_steps() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-langgraph-") as tmp:
        peer_port = free_port()
        peer = subprocess.Popen(
            [sys.executable, "-m", "tests.providers.llm_peer", "--port", str(peer_port)],
            cwd=REPO_ROOT,
            env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO_ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        stack = Stack(Path(tmp))
        try:
            wait_for_port("127.0.0.1", peer_port, proc=peer)
            peer_url = f"http://127.0.0.1:{peer_port}/v1"
            env = {
                "AGENTIC_LLM_BASE_URL": peer_url,
                "AGENTIC_LLM_MODEL": "bench",
                "CHECKPOINT_STORE": "memory",
            }
            stack.start_runtimes(tenant="tests.benchmarks.bench_langgraph:app", extra=env)
            _, oe_port = stack.start_oe({"OE_SQLITE_PATH": str(Path(tmp) / "oe.sqlite3")})
            # One event loop per run: ChatOpenAI's client belongs to the loop that first used it.
            bare = asyncio.run(_bare_turns(peer_url, TURNS, warmup=WARMUP_TURNS))
            governed = asyncio.run(_governed_turns(oe_port, TURNS, warmup=WARMUP_TURNS))
        finally:
            stack.stop()
            peer.terminate()
            peer.wait(timeout=10)
    print(f"{TURNS} turns one after another, 3 super-steps each (model -> tools -> model):")
    for kind in ("model", "tools"):
        b, g = bare[kind], governed[kind]
        print(
            f"  {kind:5s} super-step  bare p50 {_ms(_percentile(b, 0.5))} p99 {_ms(_percentile(b, 0.99))} | "
            f"governed p50 {_ms(_percentile(g, 0.5))} p99 {_ms(_percentile(g, 0.99))} | "
            f"added p50 {_ms(_percentile(g, 0.5) - _percentile(b, 0.5))}"
        )
    all_b, all_g = bare["model"] + bare["tools"], governed["model"] + governed["tools"]
    print(
        f"  per super-step, both kinds: added p50 {_ms(_percentile(all_g, 0.5) - _percentile(all_b, 0.5))}"
        f"  p99 {_ms(_percentile(all_g, 0.99) - _percentile(all_b, 0.99))}"
    )


# Checkpoints ----------------------------------------------------------------------------------------


def _checkpoint(turn: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A realistic checkpoint: a conversation of 10 messages."""
    checkpoint = empty_checkpoint()
    messages = []
    for i in range(3):
        messages += [
            HumanMessage(f"question {turn}.{i} " * 8, id=f"h{i}"),
            AIMessage(
                "", id=f"a{i}", tool_calls=[{"id": f"c{i}", "name": "noop", "args": {"item_id": str(i)}}]
            ),
            ToolMessage(json.dumps({"item_id": str(i)}), tool_call_id=f"c{i}", id=f"t{i}"),
        ]
    messages.append(AIMessage("the answer " * 20, id="final"))
    checkpoint["channel_values"] = {"messages": messages}
    checkpoint["channel_versions"] = {"messages": turn + 1}
    return checkpoint, {"messages": turn + 1}


async def _save_load(saver: BaseCheckpointSaver) -> tuple[list[float], list[float]]:
    saves, loads = [], []
    thread = uuid.uuid4().hex
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for turn in range(CHECKPOINT_ROUNDS):
        checkpoint, versions = _checkpoint(turn)
        started = time.perf_counter()
        config = await saver.aput(config, checkpoint, {"source": "loop", "step": turn}, versions)
        saves.append(time.perf_counter() - started)
        started = time.perf_counter()
        found = await saver.aget_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        loads.append(time.perf_counter() - started)
        assert found is not None and found.checkpoint["id"] == checkpoint["id"]
    # FerretDB's lookups slow down as a collection grows: every round starts from the same size.
    await saver.adelete_thread(thread)
    return saves, loads


async def _backend_pair(env: dict[str, str]) -> tuple[tuple[list[float], list[float]], ...]:
    platform = PlatformCheckpointer.from_settings(checkpoint_settings(env))
    await platform.aget_tuple({"configurable": {"thread_id": "warm", "checkpoint_ns": ""}})  # opens it
    direct = await platform._saver()  # the very backend saver, called without the platform's checks
    results = []
    for saver in (direct, platform, platform, direct):  # A-B-B-A, so a drift over time hits both alike
        results.append(await _save_load(saver))
    await platform.aclose()
    return results[0], results[1], results[3], results[2]


def _checkpoints() -> None:
    from tests.integration.ferretdb import running_ferretdb

    print(f"checkpoint save (aput) and load (aget_tuple), {CHECKPOINT_ROUNDS} x 2 rounds each, 10 messages:")
    with tempfile.TemporaryDirectory(prefix="bench-lg-cp-") as tmp, running_ferretdb() as uri:
        backends = {
            "memory": {"CHECKPOINT_STORE": "memory"},
            "sqlite": {"CHECKPOINT_STORE": "sqlite", "CHECKPOINT_SQLITE_PATH": str(Path(tmp) / "cp.sqlite3")},
            "mongodb": {"MONGODB_URI": uri, "CHECKPOINT_DB_NAME": "bench_checkpoints"},
        }
        for name, env in backends.items():
            d1, p1, d2, p2 = asyncio.run(_backend_pair(env))
            direct_saves, direct_loads = d1[0] + d2[0], d1[1] + d2[1]
            platform_saves, platform_loads = p1[0] + p2[0], p1[1] + p2[1]
            print(
                f"  {name:7s} save p50 direct {_ms(_percentile(direct_saves, 0.5))} "
                f"platform {_ms(_percentile(platform_saves, 0.5))} | "
                f"load p50 direct {_ms(_percentile(direct_loads, 0.5))} "
                f"platform {_ms(_percentile(platform_loads, 0.5))}"
            )


def main() -> None:
    print("load average before: {:.2f} {:.2f} {:.2f} (2 cores shared)".format(*os.getloadavg()))
    _super_steps()
    _checkpoints()
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
