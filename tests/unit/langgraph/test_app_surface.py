"""The App surface beyond a plain ReAct turn: parallel tasks on resume, graphs without a checkpointer, CP-07,
LangChain tools, models in the Tool Pod's start-up construction, and the message translation (LG-14)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Send, interrupt

from agent_runtime.langgraph import App, LangChainModelAdapter, from_platform, to_platform
from agent_runtime.langgraph.stopped_tool_calls import STOPPED_TEXT, complete_stopped_tool_calls
from agent_runtime.protocol import AGENT_SUSPEND, AERExecuteRequest, CallbackStatus, ExecutorCallback
from agent_runtime.sdk import RequestContext
from agent_runtime.servers.executions import run_execution
from agent_runtime.servers.llm_calls import construction_context
from tests.unit.langgraph.graphs import ALL_TOOLS, UNREACHABLE_MODEL, react_app
from tests.unit.langgraph.oe_replay import ReplayingOE
from tests.unit.runtime.oe_double import ai


def _run(app: App, oe: ReplayingOE, *, resume: bool = False, execution_id: str = "ex-1") -> ExecutorCallback:
    request = AERExecuteRequest(
        execution_id=execution_id,
        session_id="s",
        input={"messages": [{"role": "user", "content": "go"}]},
        resume=resume,
    )
    return asyncio.run(run_execution(app, request, oe=oe, tools=list(ALL_TOOLS)))


def _send_app() -> App:
    """Each tool call of the model is its own LangGraph task (Send), as create_react_agent's v2 does."""
    app = App(app_name="unit-send", env={"CHECKPOINT_STORE": "memory"})

    @app.entrypoint
    def build(ctx: RequestContext) -> Any:
        tools = {t.name: t for t in app.langchain_tools(ctx)}
        model = app.llm(UNREACHABLE_MODEL, llm_id="main").bind_tools(list(tools.values()))

        async def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(state["messages"])]}

        async def one_tool(call: dict[str, Any]) -> dict[str, Any]:
            return {"messages": [await tools[call["name"]].ainvoke(call)]}

        def route(state: MessagesState) -> Any:
            calls = state["messages"][-1].tool_calls
            return [Send("tool", {**c, "type": "tool_call"}) for c in calls] if calls else END

        graph = StateGraph(MessagesState)
        graph.add_node("agent", agent)
        graph.add_node("tool", one_tool)
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", route, ["tool", END])
        graph.add_edge("tool", "agent")
        return graph.compile(checkpointer=app.checkpointer())

    return app


def test_a_resume_re_runs_only_the_interrupted_task_with_its_own_step() -> None:
    oe = ReplayingOE(
        sensitive=["publish"],
        model_answers=[
            ai(tool_calls=[("c1", "lookup", {"word": "a"}), ("c2", "publish", {"text": "x"})]),
            ai("done"),
        ],
    )
    app = _send_app()
    first = _run(app, oe)
    assert first.status is CallbackStatus.SUSPENDED, first
    publish_step = first.metadata["step"]
    assert sorted(oe.steps) == [(1, "invoke_llm"), (2, "lookup"), (3, "publish")]
    oe.approve(publish_step)
    oe.requests.clear()
    second = _run(app, oe, resume=True)
    assert second.status is CallbackStatus.COMPLETED, second
    # The lookup task had finished (its writes were kept): only the publish task ran again, as its step.
    assert oe.steps == [(publish_step, "publish"), (4, "invoke_llm")]


def test_a_graph_without_a_checkpointer_resumes_from_the_start_against_the_replay_cache() -> None:
    oe = ReplayingOE(
        sensitive=["publish"],
        model_answers=[ai(tool_calls=[("c1", "publish", {"text": "x"})]), ai("done")],
    )
    app = react_app(saver=lambda app: None)
    assert _run(app, oe).status is CallbackStatus.SUSPENDED
    oe.approve(2)
    oe.requests.clear()
    second = _run(app, oe, resume=True)
    assert second.status is CallbackStatus.COMPLETED, second
    assert oe.steps == [(1, "invoke_llm"), (2, "publish"), (3, "invoke_llm")]
    assert [step for step, _ in oe.executed] == [1, 2, 3]


def test_a_resume_without_its_checkpoint_fails_naming_the_fix() -> None:
    oe = ReplayingOE(model_answers=[])
    callback = _run(react_app(), oe, resume=True)
    assert callback.status is CallbackStatus.FAILED
    assert callback.error is not None and "MONGODB_URI" in callback.error.explanation
    assert oe.requests == []


def test_a_native_interrupt_is_sent_to_the_oe_as_a_held_step_of_kind_interrupt() -> None:
    app = App(app_name="native", env={"CHECKPOINT_STORE": "memory"})

    @app.entrypoint
    def build(ctx: RequestContext) -> Any:
        def ask(state: MessagesState) -> dict[str, Any]:
            return {"messages": [HumanMessage(str(interrupt("ok?")))]}

        graph = StateGraph(MessagesState)
        graph.add_node("ask", ask)
        graph.add_edge(START, "ask")
        return graph.compile(checkpointer=app.checkpointer())

    oe = ReplayingOE()
    _run(app, oe)
    # The runner asks the OE to hold the interrupt at a step of its own, the value as its payload (this
    # double answers it like a tool, so the run then fails; tests/integration/langgraph run the real OE).
    (held,) = [request for request in oe.requests if request.tool == AGENT_SUSPEND]
    assert held.args == {"reason": "interrupt", "payload": "ok?", "kind": "interrupt"}


def test_a_langchain_tool_registers_as_an_app_tool_and_runs_governed() -> None:
    app = react_app()

    @tool
    def shout(text: str) -> str:
        """Shout a text."""
        return text.upper() + "!"

    app.tool(shout, is_local=True)
    spec = app.tools["shout"]
    assert spec.is_local and spec.input_schema["properties"] == {"text": {"title": "Text", "type": "string"}}
    assert asyncio.run(spec.acall(spec.bind({"text": "hi"}))) == "HI!"
    with pytest.raises(Exception, match="registered twice"):
        app.tool(shout)
    oe = ReplayingOE(
        local_tools=["shout"],
        model_answers=[ai(tool_calls=[("c1", "shout", {"text": "hey"})]), ai("done")],
    )
    tools = [*ALL_TOOLS, {"name": "shout", "description": "Shout a text.", "inputSchema": spec.input_schema}]
    request = AERExecuteRequest(execution_id="ex-1", session_id="s", input={"messages": [("user", "go")]})
    callback = asyncio.run(run_execution(app, request, oe=oe, tools=tools))
    assert callback.status is CallbackStatus.COMPLETED, callback
    assert callback.result["messages"][2]["content"] == "HEY!"
    assert oe.results[0].result == "HEY!"  # the local body's outcome was reported to the OE


def test_the_tool_pod_construction_registers_the_adapted_model_and_calls_nothing() -> None:
    from langchain_openai import ChatOpenAI

    # The Tool Pod does not get the AER's checkpoint store: its build must not need it.
    app = App(app_name="pod", env={"CHECKPOINT_STORE": "mongodb"})
    chat = ChatOpenAI(base_url="http://127.0.0.1:9/v1", model="m", api_key=lambda: "unused", max_retries=0)

    @app.entrypoint
    def build(ctx: RequestContext) -> Any:
        model = app.llm(chat, llm_id="main")
        graph = StateGraph(MessagesState)
        graph.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
        graph.add_edge(START, "agent")
        return graph.compile(checkpointer=app.checkpointer())

    app.construct(construction_context(tools=list(ALL_TOOLS)))
    registered = app.llms["main"]
    assert isinstance(registered, LangChainModelAdapter) and registered.model is chat
    with pytest.raises(RuntimeError, match=r"outside the @app\.entrypoint"):
        app.llm(chat, llm_id="late")


def test_messages_round_trip_keeps_ids_names_metadata_and_tool_calls() -> None:
    original = [
        SystemMessage("be brief", id="s1"),
        HumanMessage("hi", id="h1", name="ana"),
        AIMessage(
            "",
            id="a1",
            name="bot",
            additional_kwargs={"refusal": None},
            response_metadata={"model_name": "m", "finish_reason": "tool_calls"},
            tool_calls=[{"id": "c1", "name": "lookup", "args": {"word": "x"}, "type": "tool_call"}],
            usage_metadata={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
        ),
        ToolMessage('{"ok": true}', tool_call_id="c1", name="lookup", id="t1", status="error"),
    ]
    platform = [to_platform(m) for m in original]
    json.dumps(platform)
    back = [from_platform(m) for m in platform]
    for before, after in zip(original, back, strict=True):
        assert type(after) is type(before)
        for field in ("content", "id", "name", "additional_kwargs", "response_metadata"):
            assert getattr(after, field) == getattr(before, field), field
    assert back[2].tool_calls == original[2].tool_calls
    assert back[2].usage_metadata == original[2].usage_metadata
    assert back[3].tool_call_id == "c1" and back[3].status == "error"


def test_unanswered_tool_calls_get_a_fixed_stopped_message() -> None:
    ai_message = AIMessage(
        "", tool_calls=[{"id": "c1", "name": "a", "args": {}}, {"id": "c2", "name": "b", "args": {}}]
    )
    answered = ToolMessage("fine", tool_call_id="c1")
    patched = complete_stopped_tool_calls([HumanMessage("x"), ai_message, answered, HumanMessage("y")])
    assert [type(m).__name__ for m in patched] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "HumanMessage",
    ]
    assert patched[3].tool_call_id == "c2" and patched[3].content == STOPPED_TEXT
