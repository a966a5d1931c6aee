"""LangGraph's own documented patterns, written as the docs write them, on Agent Engine (issue 31).

The only differences from the docs: each graph is built in the App's entrypoint, its tools are registered
with the App (`app.tool`), its model is registered with `app.llm`, and it compiles with
`app.checkpointer()`. The model is `ChatOpenAI(model=...)` with no key, as the docs write it (the Tool Pod
reads OPENAI_API_KEY from its environment; the AER never holds one). The test scaffolding picks the
pattern by the session id's prefix (`react-1`, `review-2`, ...), so one set of processes serves them all.

Tools: `get_weather` (a LangChain `@tool`, the object itself handed to the graphs) and `book_table` (an
`@app.tool` function, in the Agent's requireApproval); both run in the Tool Pod and append each call to
the ledger file the tests count.
"""

from __future__ import annotations

import json
import operator
import os
import time
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AIMessage
from langchain_core.tools import ToolException, tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, create_react_agent, tools_condition
from langgraph.types import Command, Send, interrupt
from lg_stream_graph import streamed_react

from agent_runtime.langgraph import App, InterruptRejected
from agent_runtime.sdk import RequestContext

app = App(app_name="lg-patterns")


def _ledger(entry: dict[str, Any]) -> None:
    with Path(os.environ["LOOP_LEDGER"]).open("a", encoding="utf-8") as out:
        out.write(json.dumps(entry, sort_keys=True) + "\n")


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city, written as 'city, country'."""
    if "," not in city:
        raise ToolException("Unknown location, use <city, country>")
    _ledger({"tool": "get_weather", "city": city})
    return f"It's always sunny in {city}"


# The docs hand `get_weather` itself to the graph: that object is now governed (its ledger declared).
app.tool(get_weather, required_secrets=["LOOP_LEDGER"])


@app.tool(required_secrets=["LOOP_LEDGER"])  # a body sees only the env it declares (issue 36)
def book_table(restaurant: str, people: int) -> dict[str, Any]:
    """Book a table at a restaurant for a number of people."""
    _ledger({"tool": "book_table", "restaurant": restaurant, "people": people})
    return {"booked": restaurant, "people": people}


@app.tool(required_secrets=["LOOP_LEDGER"])
def ship(item: str) -> dict[str, Any]:
    """Ship an item. A gate for the restart test: it waits for `go-<item>` beside the ledger."""
    gates = Path(os.environ["LOOP_LEDGER"]).parent / "gates"
    gates.mkdir(exist_ok=True)
    (gates / f"at-{item}").touch()
    deadline = time.monotonic() + 60
    while not (gates / f"go-{item}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    _ledger({"tool": "ship", "item": item})
    return {"shipped": item}


def _model() -> ChatOpenAI:
    # As the docs write it, no key; the loopback peer stands in for the provider's endpoint.
    return ChatOpenAI(model="loop-model", base_url=os.environ["AGENTIC_LLM_BASE_URL"], max_retries=0)


def react(*, breakpoint: bool) -> Any:
    """LangGraph's prebuilt ReAct agent, with and without a breakpoint before the tools."""
    model = app.llm(_model(), llm_id="main")
    return create_react_agent(
        model,
        tools=[get_weather, book_table],
        checkpointer=app.checkpointer(),
        interrupt_before=["tools"] if breakpoint else None,
    )


def crashing_hook() -> Any:
    """The prebuilt agent with a post-model hook that fails on 'crash' (a tenant bug ending a turn)."""

    def audit_hook(state: MessagesState) -> dict[str, Any]:
        asked = [m for m in state["messages"] if m.type == "human"][-1]
        if "crash" in str(asked.content):
            raise RuntimeError("the audit hook crashed")
        return {}

    return create_react_agent(
        app.llm(_model(), llm_id="main"),
        tools=[get_weather, book_table],
        checkpointer=app.checkpointer(),
        post_model_hook=audit_hook,
    )


def review_tool_calls() -> Any:
    """LangGraph's "review tool calls" how-to: a human reviews each call with interrupt()."""
    tools = [get_weather, book_table]
    model = app.llm(_model(), llm_id="main").bind_tools(tools)

    def call_llm(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def human_review_node(state: MessagesState) -> Command[Literal["call_llm", "run_tool"]]:
        last_message = state["messages"][-1]
        tool_call = last_message.tool_calls[-1]
        human_review = interrupt({"question": "Is this correct?", "tool_call": tool_call})
        review_action = human_review["action"]
        review_data = human_review.get("data")
        if review_action == "continue":
            return Command(goto="run_tool")
        if review_action == "update":
            updated_message = {
                "role": "ai",
                "content": last_message.content,
                "tool_calls": [{"id": tool_call["id"], "name": tool_call["name"], "args": review_data}],
                "id": last_message.id,
            }
            return Command(goto="run_tool", update={"messages": [updated_message]})
        tool_message = {
            "role": "tool",
            "content": review_data,
            "name": tool_call["name"],
            "tool_call_id": tool_call["id"],
        }
        return Command(goto="call_llm", update={"messages": [tool_message]})

    def route_after_llm(state: MessagesState) -> Literal["__end__", "human_review_node"]:
        last = state["messages"][-1]
        return "human_review_node" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node(call_llm)
    builder.add_node("run_tool", ToolNode(tools))
    builder.add_node(human_review_node)
    builder.add_edge(START, "call_llm")
    builder.add_conditional_edges("call_llm", route_after_llm)
    builder.add_edge("run_tool", "call_llm")
    return builder.compile(checkpointer=app.checkpointer())


def guarded_review() -> Any:
    """The "review tool calls" graph, whose review node catches a rejection and tells the model instead."""
    tools = [get_weather]
    model = app.llm(_model(), llm_id="main").bind_tools(tools)

    def call_llm(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def human_review_node(state: MessagesState) -> Command[Literal["call_llm", "run_tool"]]:
        tool_call = state["messages"][-1].tool_calls[-1]
        try:
            interrupt({"question": "Is this correct?", "tool_call": tool_call})
        except InterruptRejected as rejected:
            declined = {
                "role": "tool",
                "content": f"the reviewer declined this call: {rejected.notes}",
                "name": tool_call["name"],
                "tool_call_id": tool_call["id"],
            }
            return Command(goto="call_llm", update={"messages": [declined]})
        return Command(goto="run_tool")

    def route_after_llm(state: MessagesState) -> Literal["__end__", "human_review_node"]:
        last = state["messages"][-1]
        return "human_review_node" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node(call_llm)
    builder.add_node("run_tool", ToolNode(tools))
    builder.add_node(human_review_node)
    builder.add_edge(START, "call_llm")
    builder.add_conditional_edges("call_llm", route_after_llm)
    builder.add_edge("run_tool", "call_llm")
    return builder.compile(checkpointer=app.checkpointer())


class Approvals(TypedDict):
    answers: Annotated[list[Any], operator.add]


def multiple_interrupts() -> Any:
    """Several interrupts: two in one node, then one in each of two parallel (Send) tasks."""

    def ask_twice(state: Approvals) -> dict[str, Any]:
        name = interrupt("what is your name?")
        age = interrupt(f"how old are you, {name}?")
        return {"answers": [{"name": name, "age": age}]}

    def fan_out(state: Approvals) -> list[Send]:
        return [Send("approve", {"answers": [], "item": item}) for item in ("first", "second")]

    def approve(state: dict[str, Any]) -> dict[str, Any]:
        return {"answers": [{state["item"]: interrupt(f"approve the {state['item']} item?")}]}

    builder = StateGraph(Approvals)
    builder.add_node("ask_twice", ask_twice)
    builder.add_node("approve", approve)
    builder.add_edge(START, "ask_twice")
    builder.add_conditional_edges("ask_twice", fan_out, ["approve"])
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=app.checkpointer())


class Order(TypedDict, total=False):
    item: str
    shipped: Any


def ask_then_ship() -> Any:
    """A node asks with interrupt() what to ship; the next node ships the answer (issue 39: an AER lost
    after the hold was resumed)."""

    def ask(state: Order) -> dict[str, Any]:
        return {"item": interrupt("what shall I ship?")}

    def send(state: Order) -> dict[str, Any]:
        return {"shipped": ship.invoke({"item": state["item"]})}

    builder = StateGraph(Order)
    builder.add_node("ask", ask)
    builder.add_node("send", send)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "send")
    builder.add_edge("send", END)
    return builder.compile(checkpointer=app.checkpointer())


def sync_graph() -> Any:
    """The docs' hand-written ReAct loop with plain `def` nodes and `model.invoke`."""
    tools = [get_weather, book_table]
    model = app.llm(_model(), llm_id="main").bind_tools(tools)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def call_tools(state: MessagesState) -> dict[str, Any]:
        by_name = {t.name: t for t in tools}
        return {"messages": [by_name[call["name"]].invoke(call) for call in state["messages"][-1].tool_calls]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", call_model)
    builder.add_node("tools", call_tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=app.checkpointer())


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    pattern = (ctx.session_id or "react").split("-", 1)[0]
    if pattern == "react":
        return react(breakpoint=False)
    if pattern == "breakpoint":
        return react(breakpoint=True)
    if pattern == "hook":
        return crashing_hook()
    if pattern == "review":
        return review_tool_calls()
    if pattern == "guarded":
        return guarded_review()
    if pattern == "multi":
        return multiple_interrupts()
    if pattern == "sync":
        return sync_graph()
    if pattern == "ship":
        return ask_then_ship()
    if pattern == "streamed":
        # Issue 32's stream modes: the same graph the test also runs bare (lg_stream_graph.py).
        model = app.llm(_model(), llm_id="main")
        return streamed_react(model, [get_weather, book_table], checkpointer=app.checkpointer())
    raise ValueError(f"no pattern {pattern!r}")
