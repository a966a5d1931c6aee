"""Issue 31's pure pieces: a graph's pauses as holds, edited calls in the state, stopped calls answered,
the AER's placeholder keys, a tool's own message."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import langgraph.types
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import ToolException
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from agent_runtime.langgraph.edited_calls import edited_ai_message
from agent_runtime.langgraph.interrupt_rejection import InterruptRejected, install, rejection_value
from agent_runtime.langgraph.model_keys import PLACEHOLDER, placeholder_keys
from agent_runtime.langgraph.native_holds import (
    BREAKPOINT,
    INTERRUPT,
    HoldRejected,
    pending_hold,
    resume_value,
)
from agent_runtime.langgraph.stopped_tool_calls import STOPPED_TEXT, stopped_answers
from agent_runtime.protocol import SuspendReply
from agent_runtime.sdk import ToolError
from agent_runtime.sdk.tool_messages import tool_message

pytestmark = pytest.mark.unit


class Log(TypedDict):
    log: Annotated[list[Any], operator.add]


def _state(*, breakpoint: bool) -> Any:
    def ask(state: Log) -> dict[str, Any]:
        return {"log": [interrupt({"q": "ok?"})]}

    builder = StateGraph(Log)
    builder.add_node("first", lambda state: {"log": ["first"]})
    builder.add_node("ask", ask)
    builder.add_edge(START, "first")
    builder.add_edge("first", "ask")
    builder.add_edge("ask", END)
    graph = builder.compile(checkpointer=InMemorySaver(), interrupt_before=["ask"] if breakpoint else None)
    config = {"configurable": {"thread_id": "t"}}

    async def run() -> Any:
        await graph.ainvoke({"log": []}, config)
        return await graph.aget_state(config)

    return asyncio.run(run())


def test_an_interrupt_is_held_with_its_value_and_a_static_breakpoint_with_the_next_nodes() -> None:
    held = pending_hold(_state(breakpoint=False))
    assert held is not None and held.kind == INTERRUPT and held.payload == {"q": "ok?"} and held.interrupt_id
    assert held.args() == {"reason": "interrupt", "payload": {"q": "ok?"}, "kind": "interrupt"}
    stopped = pending_hold(_state(breakpoint=True))
    assert stopped is not None and stopped.kind == BREAKPOINT and stopped.payload == {"next": ["ask"]}


def test_an_approved_interrupt_resumes_with_the_value_and_a_rejection_raises_with_the_notes() -> None:
    holding = {"step": 4, "kind": INTERRUPT, "interrupt_id": "abc", "args": {}}
    approved = SuspendReply(step=4, reason="interrupt", decision="approved", kind=INTERRUPT, value=[1])
    command = resume_value(holding, approved)
    assert command.resume == {"abc": [1]}
    assert resume_value({**holding, "kind": BREAKPOINT, "interrupt_id": None}, approved) is None
    rejected = approved.model_copy(update={"decision": "rejected", "reviewer_notes": "no"})
    assert resume_value(holding, rejected).resume == {"abc": rejection_value(notes="no", step=4)}
    with pytest.raises(HoldRejected, match="breakpoint at step 4: no"):
        resume_value({**holding, "kind": BREAKPOINT, "interrupt_id": None}, rejected)


def _reviewed(*, catch: bool) -> Any:
    def ask(state: Log) -> dict[str, Any]:
        try:
            return {"log": [interrupt("send it?")]}
        except InterruptRejected as rejected:
            if not catch:
                raise
            return {"log": [f"declined: {rejected.notes}"]}

    builder = StateGraph(Log)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=InMemorySaver())


def test_a_rejection_marker_raises_interrupt_rejected_at_the_nodes_own_interrupt() -> None:
    """`install` rebinds this module's `from langgraph.types import interrupt` too; the value passes."""
    install()
    assert interrupt is not langgraph.types.interrupt.__wrapped__
    config = {"configurable": {"thread_id": "t"}}

    async def run(graph: Any, answer: Any) -> Any:
        first = await graph.ainvoke({"log": []}, config)
        (pending,) = first["__interrupt__"]
        return await graph.ainvoke(Command(resume={pending.id: answer}), config)

    assert asyncio.run(run(_reviewed(catch=True), "yes"))["log"] == ["yes"]
    marker = rejection_value(notes="not today", step=3)
    assert asyncio.run(run(_reviewed(catch=True), marker))["log"] == ["declined: not today"]
    with pytest.raises(InterruptRejected, match="interrupt at step 3: not today") as raised:
        asyncio.run(run(_reviewed(catch=False), marker))
    assert raised.value.notes == "not today" and raised.value.step == 3
    # A value that merely contains the key is the reviewer's, not a rejection.
    other = {"__agent_engine_interrupt_rejected__": 1, "more": 2}
    assert asyncio.run(run(_reviewed(catch=True), other))["log"] == [other]


def test_an_edited_call_replaces_only_its_own_args_and_keeps_the_requested_ones_in_metadata() -> None:
    asked = AIMessage(
        "",
        id="ai-1",
        tool_calls=[
            {"id": "c1", "name": "book", "args": {"people": 2}},
            {"id": "c2", "name": "weather", "args": {"city": "Oslo"}},
        ],
    )
    edited = edited_ai_message([HumanMessage("hi"), asked], tool_call_id="c1", executed={"people": 4})
    assert edited is not None and edited.id == "ai-1"
    assert [call["args"] for call in edited.tool_calls] == [{"people": 4}, {"city": "Oslo"}]
    assert edited.response_metadata["agent_engine"]["requested_args"] == {"c1": {"people": 2}}
    assert edited_ai_message([asked], tool_call_id="nope", executed={}) is None


def test_each_unanswered_tool_call_gets_the_stopped_answer() -> None:
    messages = [
        AIMessage(
            "",
            id="a",
            tool_calls=[{"id": "c1", "name": "t", "args": {}}, {"id": "c2", "name": "t", "args": {}}],
        ),
        ToolMessage("done", tool_call_id="c1"),
    ]
    (answer,) = stopped_answers(messages)
    assert answer.tool_call_id == "c2" and answer.content == STOPPED_TEXT and answer.status == "error"
    assert stopped_answers([*messages, answer]) == []


def test_placeholder_keys_only_in_the_aer_and_only_for_unset_variables() -> None:
    aer = {"RUNNER_MODE": "aer", "AGENTIC_LLM_API_KEY_ENV": "MY_KEY", "ANTHROPIC_API_KEY": "set-by-someone"}
    keys = placeholder_keys(aer)
    assert keys["OPENAI_API_KEY"] == PLACEHOLDER and keys["MY_KEY"] == PLACEHOLDER
    assert "ANTHROPIC_API_KEY" not in keys
    assert placeholder_keys({"RUNNER_MODE": "tool", "AGENTIC_LLM_API_KEY_ENV": "MY_KEY"}) == {}
    assert placeholder_keys({}) == {}


def test_only_tool_error_and_tool_exception_carry_their_text_to_the_model() -> None:
    assert (
        tool_message(ToolError("Unknown location, use <city, country>"))
        == "Unknown location, use <city, country>"
    )
    assert tool_message(ToolException("use a date")) == "use a date"
    assert tool_message(RuntimeError("token sk-123 rejected")) is None
    assert len(tool_message(ToolError("x" * 10_000)) or "") == 2000
