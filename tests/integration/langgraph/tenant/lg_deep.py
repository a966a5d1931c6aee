"""A deep agent (LangChain's deepagents) on Agent Engine (issue 39): a lead with two subagents and skills.

`researcher` looks topics up (`lookup`), `writer` publishes (`publish`, sensitive: held for a human); the
file system and the skills are the Tool Pod's (DEEP_AGENT_FILES_ROOT). Both tools append each call that
really ran to the ledger file the tests count. The model is a key-less ChatOpenAI run in the Tool Pod
against the scripted loopback peer.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import create_react_agent

from agent_runtime.langgraph import App
from agent_runtime.sdk import RequestContext

app = App(app_name="lg-deep")
app.enable_deep_agents()


def _ledger(entry: dict[str, Any]) -> None:
    with Path(os.environ["LOOP_LEDGER"]).open("a", encoding="utf-8") as out:
        out.write(json.dumps(entry, sort_keys=True) + "\n")


def _gate(topic: str) -> None:
    """A topic named `gate-...` waits (at most 60 s) for the test's go, after saying it got here."""
    if not topic.startswith("gate-"):
        return
    gates = Path(os.environ["LOOP_LEDGER"]).parent / "gates"
    gates.mkdir(exist_ok=True)
    (gates / f"at-{topic}").touch()
    deadline = time.monotonic() + 60
    while not (gates / f"go-{topic}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


@app.tool(required_secrets=["LOOP_LEDGER"])
def lookup(topic: str) -> dict[str, Any]:
    """Look a topic up."""
    _gate(topic)
    _ledger({"tool": "lookup", "topic": topic})
    return {"topic": topic, "facts": [f"{topic} is well documented"]}


@app.tool(required_secrets=["LOOP_LEDGER"], sensitive=True)
def publish(text: str) -> dict[str, Any]:
    """Publish a text."""
    _ledger({"tool": "publish", "text": text})
    return {"published": True}


def _model() -> ChatOpenAI:
    return ChatOpenAI(model="loop-model", base_url=os.environ["AGENTIC_LLM_BASE_URL"], max_retries=0)


def subgraph_as_node() -> Any:
    """A compiled subgraph (the prebuilt ReAct agent with `publish`) used as a node of a parent graph."""
    # The model id the Tool Pod knows: its start-up build (no session) builds the deep agent.
    inner = create_react_agent(app.llm(_model(), llm_id="deep-agent"), tools=[publish])

    def after(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"after: {state['messages'][-1].content}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("inner", inner)
    graph.add_node("after", after)
    graph.add_edge(START, "inner")
    graph.add_edge("inner", "after")
    graph.add_edge("after", END)
    return graph.compile(checkpointer=app.checkpointer())


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    if (ctx.session_id or "").startswith("sub-"):
        return subgraph_as_node()
    # The governed tools app.tool returned (the thread routes build the graph with no tool surface).
    return app.deep_agent(
        _model(),
        name="lead",
        system_prompt="You lead a small team.",
        subagents=[
            {
                "name": "researcher",
                "description": "Looks topics up.",
                "system_prompt": "Research the topic.",
                "tools": [lookup],
            },
            {
                "name": "writer",
                "description": "Writes and publishes.",
                "system_prompt": "Write and publish.",
                "tools": [publish],
            },
        ],
        skills=["/skills/"],
    )
