"""Tenant LangGraph apps for the unit tests: a ReAct graph over governed tools and a governed model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from agent_runtime.langgraph import App
from agent_runtime.llm import ChatCompletionsModel
from agent_runtime.sdk import RequestContext

# Never called in the AER: the OE double answers the model calls.
UNREACHABLE_MODEL = ChatCompletionsModel(base_url="http://127.0.0.1:9/v1", model="unit")

TOOLS: tuple[dict[str, Any], ...] = (
    {
        "name": "lookup",
        "description": "Look a word up.",
        "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    },
    {
        "name": "publish",
        "description": "Publish a note (sensitive).",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
)


def react_app(
    *,
    saver: Callable[[App], BaseCheckpointSaver | None] = lambda app: app.checkpointer(),
    loop_back: bool = True,
    env: dict[str, str] | None = None,
) -> App:
    """A ReAct agent: model -> tools -> model ... -> end. `loop_back=False` ends right after the tools."""
    app = App(app_name="unit-react", env=env if env is not None else {"CHECKPOINT_STORE": "memory"})

    @app.tool(is_local=True)
    def word_count(text: str) -> dict[str, int]:
        """Count the words in a text."""
        return {"words": len(text.split())}

    @app.entrypoint
    def build(ctx: RequestContext) -> Any:
        tools = app.langchain_tools(ctx)
        model = app.llm(UNREACHABLE_MODEL, llm_id="main").bind_tools(tools)

        async def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(state["messages"])]}

        graph = StateGraph(MessagesState)
        graph.add_node("agent", agent)
        graph.add_node("tools", ToolNode(tools))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition)
        graph.add_edge("tools", "agent" if loop_back else END)
        return graph.compile(checkpointer=saver(app))

    return app


WORD_COUNT_SCHEMA = {
    "name": "word_count",
    "description": "Count the words in a text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}
ALL_TOOLS = (*TOOLS, WORD_COUNT_SCHEMA)
