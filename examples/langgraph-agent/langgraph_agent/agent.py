"""The example LangGraph agent: a ReAct graph whose model and tools are governed by the platform.

`build` is the entrypoint: it returns the compiled graph. The Tool Pod builds it once at start-up to find
the model registered with `app.llm` (a LangChain ChatOpenAI, which runs there with the key); the AER builds
it per execution and runs it on the request's thread (`session_id:workspace_id`). Every model and tool
call goes through the Orchestration Engine: `word_count` runs here in the AER after the OE approves it,
the `notes` connector's tools run in the Tool Pod, and `notes_createNote` (a POST, so sensitive) waits
for a human's approval. The graph then stops at LangGraph's `interrupt()`, its checkpoint is saved, and
the approved resume continues from it.
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.messages import SystemMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from agent_runtime.langgraph import App
from agent_runtime.sdk import RequestContext

app = App(app_name="langgraph-agent")

SYSTEM_PROMPT = (
    "You are the notes agent. Count words with word_count, read the stored notes with notes_listNotes, "
    "and save a note with notes_createNote when the user asks you to."
)


@app.tool(is_local=True)
def word_count(text: str) -> dict[str, int]:
    """Count the words and characters in a text."""
    return {"words": len(text.split()), "characters": len(text)}


def chat_model() -> ChatOpenAI:
    """The Agent's model (endpoint, model name and the key's env name come from the Agent's spec).

    The key is read only when a call is made, which happens in the Tool Pod: the AER never holds it.
    """
    key_env = os.environ.get("AGENTIC_LLM_API_KEY_ENV", "OPENAI_API_KEY")
    return ChatOpenAI(
        base_url=os.environ["AGENTIC_LLM_BASE_URL"],
        model=os.environ["AGENTIC_LLM_MODEL"],
        api_key=lambda: os.environ[key_env],
        max_retries=1,
    )


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    """Build the ReAct graph over the governed model and the Agent's tools."""
    tools = app.langchain_tools(ctx)
    model = app.llm(chat_model(), llm_id="main").bind_tools(tools)

    async def agent(state: MessagesState) -> dict[str, Any]:
        answer = await model.ainvoke([SystemMessage(SYSTEM_PROMPT), *state["messages"]])
        return {"messages": [answer]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=app.checkpointer())
