"""Governed LangChain tools: every call goes through the OE, whoever runs the body.

`GovernedTool` is a LangChain `BaseTool` for one tool of the Agent's surface (a connector tool, an
`@app.tool` function or a registered LangChain tool): `ainvoke` asks the OE, which runs it in the Tool Pod
or routes a local tool back to this AER. Outcomes map as S2 and LG-08 say:

- a tool's own failure or a policy denial is a ToolMessage with status "error": the model reads it;
- a suspension surfaces as LangGraph's `interrupt()` (see `suspend.py`);
- a platform failure is also a ToolMessage, as in LangGraph.js, but the run is poisoned: the next model
  call, the next tool call and every save of this step are refused, and the turn ends FAILED. With the
  platform checkpointer nothing of the step persists, so no later turn shows that text to the model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForToolRun
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, ConfigDict, create_model

from agent_runtime.langgraph.edited_calls import edit_update
from agent_runtime.langgraph.subagents import calling_agent
from agent_runtime.langgraph.suspend import current_graph_run, surface_suspension
from agent_runtime.langgraph.sync_calls import run_from_worker_thread
from agent_runtime.sdk.app import DEFAULT_TOOL_TIMEOUT_S, ToolSpec
from agent_runtime.sdk.errors import (
    PlatformFailure,
    PolicyDeniedException,
    SuspendRequested,
    ToolExecutionError,
)
from agent_runtime.sdk.input_schema import ToolDefinitionError
from agent_runtime.sdk.secure import call_tool_detailed
from agent_runtime.sdk.tool_messages import TOOL_MESSAGE

PLATFORM_FAILURE_PREFIX = "platform failure, this turn ends: "


def tool_error_text(exc: ToolExecutionError | PolicyDeniedException) -> str:
    """The text the model reads for a tool's own failure or a denial (the same as the SDK's tool loop);
    a tool's own message (`ToolError`, `ToolException`) verbatim."""
    if isinstance(exc, PolicyDeniedException):
        return f"denied by policy: {exc.reason}"
    if exc.error.category == TOOL_MESSAGE and exc.error.explanation:
        return exc.error.explanation
    return f"error ({exc.error.category}): {exc.error.explanation}"


_tool_call: ContextVar[Mapping[str, Any] | None] = ContextVar("agent_runtime_lc_tool_call", default=None)


def _is_tool_call(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") == "tool_call" and "id" in value


class GovernedTool(BaseTool):
    """One tool of the Agent, called through the OE. Async only (LangGraph's ToolNode calls `ainvoke`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # Failures come back as a ToolMessage with status "error", not as an exception (see the module doc).
    handle_tool_error: bool | str | Callable[[ToolException], str] | None = True

    @classmethod
    def from_schema(cls, schema: Mapping[str, Any]) -> GovernedTool:
        """A governed tool for `{name, description, inputSchema}` as the AER lists its tools."""
        parameters = dict(schema.get("inputSchema") or {"type": "object", "properties": {}})
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        return cls(
            name=str(schema["name"]),
            description=str(schema.get("description") or schema["name"]),
            args_schema=parameters,
        )

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        token = _tool_call.set(input if _is_tool_call(input) else None)
        try:
            return await super().ainvoke(input, config, **kwargs)
        finally:
            _tool_call.reset(token)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        token = _tool_call.set(input if _is_tool_call(input) else None)
        try:
            return super().invoke(input, config, **kwargs)
        finally:
            _tool_call.reset(token)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        # A sync node or a sync ToolNode: the call runs on the run's event loop (sync_calls.py).
        run = current_graph_run()
        return run_from_worker_thread(
            lambda: self._arun(*args, **kwargs),
            loop=run.loop if run is not None else None,
            what=f"tool {self.name!r}.invoke",
        )

    async def _arun(
        self, *args: Any, run_manager: AsyncCallbackManagerForToolRun | None = None, **kwargs: Any
    ) -> Any:
        if args:
            raise ToolException(f"tool {self.name!r} takes named arguments only")
        try:
            with calling_agent():  # the subagent asking, for the OE's audit (subagents.py)
                outcome = await call_tool_detailed(self.name, kwargs)
        except SuspendRequested as signal:
            surface_suspension(signal)
        except (ToolExecutionError, PolicyDeniedException) as exc:
            raise ToolException(tool_error_text(exc)) from None
        except PlatformFailure as failure:
            # The run already refuses every later call and save; the text reaches no model (module doc).
            raise ToolException(PLATFORM_FAILURE_PREFIX + failure.message) from None
        result = outcome.result
        content = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        call = _tool_call.get()
        if call is not None and outcome.args != dict(call.get("args") or {}):
            update = edit_update(call, content=content, executed=outcome.args, tool=self.name)
            if update is not None:
                return update
        return content


class LangChainToolSpec(ToolSpec):
    """A ToolSpec whose body is a LangChain tool: the arguments pass as the plain JSON the tool validates."""

    def bind(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        values = self.arguments.model_validate(dict(arguments))
        return values.model_dump(mode="json", exclude_unset=True)


def tool_spec_from_langchain(
    tool: BaseTool, *, is_local: bool, sensitive: bool, timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
) -> ToolSpec:
    """A registered LangChain tool as the SDK's ToolSpec: its body runs where `is_local` says, governed."""
    schema = tool.args_schema
    arguments: type[BaseModel]
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        arguments = schema
        input_schema = tool.tool_call_schema.model_json_schema()  # type: ignore[union-attr]
    elif isinstance(schema, dict) or schema is None:
        # A JSON-schema tool validates its own input; the SDK passes the arguments through as they came.
        arguments = create_model(f"{tool.name}_arguments", __config__=ConfigDict(extra="allow"))
        input_schema = dict(schema or {"type": "object", "properties": {}})
    else:
        raise ToolDefinitionError(
            f"tool {tool.name!r}: args_schema must be a pydantic model or a JSON schema"
        )
    input_schema.pop("title", None)
    input_schema.setdefault("properties", {})

    # The body is a copy taken before app.tool makes `tool` itself call through the OE (registered_tools.py).
    original = tool.model_copy()

    async def body(**kwargs: Any) -> Any:
        return await original.ainvoke(kwargs)

    return LangChainToolSpec(
        name=tool.name,
        description=(tool.description or "").strip(),
        func=body,
        arguments=arguments,
        input_schema=input_schema,
        is_local=is_local,
        sensitive=sensitive,
        timeout_s=float(timeout_s),
        is_async=True,
    )
