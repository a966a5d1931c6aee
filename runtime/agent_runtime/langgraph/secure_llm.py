"""GovernedChatModel: what `app.llm(model, llm_id=...)` returns in a LangGraph App.

A LangChain chat model whose every call goes to the OE as `invoke_llm` (B-13) and runs in the Tool Pod,
where the registered model and its key are. It binds tools like any chat model, so a graph uses it as it
would the model it wraps: `app.llm(ChatOpenAI(...)).bind_tools(tools)`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field

from agent_runtime.langgraph.message_chunks import message_chunks
from agent_runtime.langgraph.messages import from_platform, to_platform_messages
from agent_runtime.langgraph.stopped_tool_calls import complete_stopped_tool_calls
from agent_runtime.langgraph.subagents import calling_agent
from agent_runtime.langgraph.suspend import current_graph_run, surface_suspension
from agent_runtime.langgraph.sync_calls import run_from_worker_thread
from agent_runtime.sdk.errors import SuspendRequested
from agent_runtime.sdk.secure import SecureWrappedLLM


def openai_tool_choice(tool_choice: Any) -> Any:
    """LangChain's tool_choice spellings in the chat-completions form the Tool Pod's model receives."""
    if tool_choice is None or isinstance(tool_choice, dict):
        return tool_choice
    if tool_choice in ("auto", "none", "required"):
        return tool_choice
    if tool_choice in ("any", True):
        return "required"
    if isinstance(tool_choice, str):
        return {"type": "function", "function": {"name": tool_choice}}
    raise ValueError(f"tool_choice {tool_choice!r} is not auto, none, any, required or a tool name")


def stable_message_id(message: Mapping[str, Any]) -> str:
    """An id for an AI message the provider gave none: the same on replay (random ids would change the
    fingerprint of every later model call)."""
    digest = hashlib.sha256(json.dumps(message, sort_keys=True, default=str).encode()).hexdigest()
    return f"ae-{digest[:32]}"


def _without_random_id(message: dict[str, Any]) -> dict[str, Any]:
    """LangGraph gives input and tool messages random ids (add_messages); the model needs none, and the
    OE's fingerprint of a replayed call must not change. AI message ids are stable (see above)."""
    if message["type"] != "ai":
        message.pop("id", None)
    return message


class GovernedChatModel(BaseChatModel):
    """A chat model whose calls the OE polices, audits and replays; the model itself runs in the Tool Pod."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm_id: str
    secure: SecureWrappedLLM = Field(exclude=True, repr=False)

    @property
    def _llm_type(self) -> str:
        return "agent-engine-governed"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"llm_id": self.llm_id}

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Offer `tools` to the model (their chat-completions schemas go to the OE with each call)."""
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = openai_tool_choice(tool_choice)
        return self.bind(tools=formatted, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # A sync node (LangGraph runs it in a worker thread): the call runs on the run's loop (sync_calls.py).
        run = current_graph_run()
        return run_from_worker_thread(
            lambda: self._agenerate(messages, stop=stop, **kwargs),
            loop=run.loop if run is not None else None,
            what=f"model {self.llm_id!r}.invoke",
        )

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools = kwargs.pop("tools", None)
        if stop:
            kwargs["stop"] = list(stop)
        try:
            sent = [
                _without_random_id(m) for m in to_platform_messages(complete_stopped_tool_calls(messages))
            ]
            with calling_agent():  # the subagent asking, for the OE's audit (subagents.py)
                answer = await self.secure.ainvoke(sent, tools=tools, **kwargs)
        except SuspendRequested as signal:
            surface_suspension(signal)
        if answer.get("id") is None:
            answer = {**answer, "id": stable_message_id(answer)}
        message = from_platform(answer)
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        """LangChain streams when a handler wants tokens (LangGraph's `messages` mode): the call streams
        through the OE, and its deltas come back as one chunk each (message_chunks.py)."""
        tools = kwargs.pop("tools", None)
        if stop:
            kwargs["stop"] = list(stop)
        try:
            sent = [
                _without_random_id(m) for m in to_platform_messages(complete_stopped_tool_calls(messages))
            ]
            with calling_agent():
                deltas, answer = await self.secure.astream_deltas(sent, tools=tools, **kwargs)
        except SuspendRequested as signal:
            surface_suspension(signal)
        if answer.get("id") is None:
            answer = {**answer, "id": stable_message_id(answer)}
        message = from_platform(answer)
        if not isinstance(message, AIMessage):
            raise TypeError(f"model {self.llm_id!r} answered a {message.type} message, not an AI message")
        for chunk in message_chunks(deltas, message):
            yield ChatGenerationChunk(message=chunk)
