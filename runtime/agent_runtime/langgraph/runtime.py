"""The LangGraph App (LG-03): the base SDK's App plus what a LangGraph agent needs.

    app = App(app_name="support-agent")

    @app.entrypoint
    def build(ctx):
        model = app.llm(ChatOpenAI(...), llm_id="main")      # runs in the Tool Pod, through the OE
        tools = app.langchain_tools(ctx)                      # connector and @app.tool tools, governed
        return build_graph(model.bind_tools(tools), tools).compile(checkpointer=app.checkpointer())

- `app.entrypoint(fn)`: `fn(ctx)` builds and returns the compiled graph; the AER runs it per execution
  with the run's thread id, the Tool Pod builds it once at start-up to find the models.
- `app.checkpointer()`: the platform checkpointer (one per App), over the store the env names.
- `app.resolve_thread_id(fn)`: the agent's own thread key, used verbatim.
- `app.llm(model, llm_id=...)`: a LangChain chat model (or a platform model) registered for the Tool Pod;
  returns a LangChain chat model whose calls go through the OE.
- `app.tool(...)`: functions as in the base SDK, and LangChain tools (`app.tool(my_tool, sensitive=True)`).
- `app.langchain_tools(ctx)`: the Agent's tools as governed LangChain tools; `app.suspend` as in the base.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from agent_runtime.langgraph import threads
from agent_runtime.langgraph.agent import LangGraphAgent, is_compiled_graph
from agent_runtime.langgraph.checkpointer import checkpoint_settings
from agent_runtime.langgraph.durable_tools import GovernedTool, tool_spec_from_langchain
from agent_runtime.langgraph.interrupt_rejection import install as install_interrupt
from agent_runtime.langgraph.llm_adapter import LangChainModelAdapter
from agent_runtime.langgraph.model_keys import set_placeholder_keys
from agent_runtime.langgraph.platform_checkpointer import PlatformCheckpointer
from agent_runtime.langgraph.registered_tools import govern_in_place
from agent_runtime.langgraph.secure_llm import GovernedChatModel
from agent_runtime.langgraph.thread_id import ThreadIdResolver, resolve_thread_id
from agent_runtime.sdk import app as base
from agent_runtime.sdk.context import RequestContext, active_run, entrypoint_active
from agent_runtime.sdk.input_schema import ToolDefinitionError
from agent_runtime.sdk.runnable import Runnable, as_runnable

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R", bound=ThreadIdResolver)


class App(base.App):
    """A LangGraph agent on Agent Engine. Name it in AGENT_ENTRYPOINT like any App."""

    def __init__(self, app_name: str = "agent", *, env: Mapping[str, str] | None = None) -> None:
        super().__init__(app_name)
        self._env = env
        self._thread_resolver: ThreadIdResolver | None = None
        self._checkpointer: PlatformCheckpointer | None = None
        self._deep_agents = False

    @property
    def app_name(self) -> str:
        return self.name

    @property
    def environ(self) -> Mapping[str, str]:
        """The environment the App reads its settings from (the process's, unless one was given)."""
        return os.environ if self._env is None else self._env

    def entrypoint(self, func: F) -> F:
        """Register the builder: `def build(ctx)` returning the compiled graph."""
        if inspect.iscoroutinefunction(func):
            raise ToolDefinitionError(
                f"a LangGraph App's entrypoint builds the graph: make {func.__name__} a plain "
                "`def build(ctx)` that returns graph.compile(checkpointer=app.checkpointer())"
            )
        return super().entrypoint(func)

    def build(self, context: RequestContext) -> Runnable:
        entry = self.entrypoint_function
        if entry is None:
            raise RuntimeError(f"app {self.name!r} has no @app.entrypoint")
        if not context.construction:
            set_placeholder_keys()  # the AER builds models it never sends with (model_keys.py)
            install_interrupt()  # a rejected interrupt() raises InterruptRejected (interrupt_rejection.py)
        built = entry(context)
        if is_compiled_graph(built):
            return LangGraphAgent(built, thread_id=self.thread_id).ainvoke
        return as_runnable(built)

    def checkpointer(self) -> PlatformCheckpointer:
        """The platform checkpointer: pass it to `graph.compile(checkpointer=...)`. One per App."""
        run = active_run()
        if run is not None and run.context.construction:
            # The Tool Pod's start-up build never runs the graph, and its env need not name the AER's store.
            return PlatformCheckpointer.wrapping(InMemorySaver())
        if self._checkpointer is None:
            self._checkpointer = PlatformCheckpointer.from_settings(checkpoint_settings(self.environ))
        return self._checkpointer

    def enable_deep_agents(self, *, sensitive: Iterable[str] = ()) -> None:
        """Register the Tool Pod's file tools a deep agent's file system runs on (`files_ls`, `files_read`,
        ...; backends/tool_sandbox.py). Call it at import; `sensitive` names operations (`write`, `edit`,
        `delete`, ...) held for review."""
        from agent_runtime.langgraph.backends import tool_sandbox  # the deepagents extra

        unknown = sorted(set(sensitive) - set(tool_sandbox.FILE_TOOLS))
        if unknown:
            raise ToolDefinitionError(
                f"no file operation {', '.join(map(repr, unknown))}; "
                f"they are {', '.join(tool_sandbox.FILE_TOOLS)}"
            )
        if not self._deep_agents:
            from agent_runtime.langgraph import plan_audit  # the deepagents extra

            tool_sandbox.register(self, sensitive=frozenset(sensitive))
            plan_audit.register(self)  # each plan a governed step of its own (plan_audit.py)
            self._deep_agents = True

    @property
    def deep_agents_enabled(self) -> bool:
        return self._deep_agents

    def deep_agent(self, model: Any, **options: Any) -> Any:
        """A deepagents agent whose every model and tool call is governed (deep_agent.py); in the
        entrypoint: `return app.deep_agent(model, tools=[...], subagents=[...], skills=[...])`."""
        from agent_runtime.langgraph.deep_agent import build_deep_agent  # the deepagents extra

        return build_deep_agent(self, model, **options)

    def resolve_thread_id(self, func: R) -> R:
        """Use `func(ctx)` as the thread id, verbatim, for new and resumed runs (no workspace suffix)."""
        if not callable(func):
            raise ToolDefinitionError(f"app.resolve_thread_id takes a function, got {type(func).__name__}")
        self._thread_resolver = func
        return func

    @property
    def has_thread_resolver(self) -> bool:
        return self._thread_resolver is not None

    async def thread_state(self, session_id: str, *, workspace_id: str) -> dict[str, Any]:
        """The session's thread as `graph.get_state` sees it, as JSON (threads.py)."""
        return await threads.thread_state(self, session_id=session_id, workspace_id=workspace_id)

    async def update_thread_state(
        self, session_id: str, *, workspace_id: str, values: Mapping[str, Any], as_node: str | None = None
    ) -> dict[str, Any]:
        """`graph.update_state(values, as_node=...)` on the session's thread; the new state as JSON."""
        return await threads.update_thread_state(
            self, session_id=session_id, workspace_id=workspace_id, values=values, as_node=as_node
        )

    async def fork_thread(
        self,
        session_id: str,
        *,
        workspace_id: str,
        execution_id: str,
        to_session_id: str,
        to_execution_id: str,
    ) -> dict[str, Any]:
        """Session fork (LG-18): copy the session's thread up to `execution_id`'s turn (threads.py)."""
        return await threads.fork_thread(
            self,
            session_id=session_id,
            workspace_id=workspace_id,
            execution_id=execution_id,
            to_session_id=to_session_id,
            to_execution_id=to_execution_id,
        )

    async def session_history(self, session_id: str, *, workspace_id: str) -> list[dict[str, Any]]:
        """The session's messages (LG-13), platform dicts."""
        return await threads.session_history(self, session_id=session_id, workspace_id=workspace_id)

    async def sessions(self, *, workspace_id: str) -> list[str]:
        """The workspace's sessions that have a thread (LG-13)."""
        return await threads.sessions(self, workspace_id=workspace_id)

    def thread_id(self, context: RequestContext) -> str:
        """The checkpoint thread id of the execution `context` describes."""
        return resolve_thread_id(context, resolver=self._thread_resolver, env=self.environ)

    def llm(self, llm: Any, *, llm_id: str = "default") -> GovernedChatModel:  # type: ignore[override]
        """Register a model under `llm_id` and return a LangChain chat model whose calls go through the OE.

        `llm` is a LangChain chat model (it runs in the Tool Pod, adapted to platform messages) or a model
        with the platform interface (`agent_runtime.llm.ChatCompletionsModel`). Call it in the entrypoint.
        """
        if not entrypoint_active():
            caller = sys._getframe(1)
            raise RuntimeError(
                f"app.llm(llm_id={llm_id!r}) called at {caller.f_code.co_filename}:{caller.f_lineno}, "
                "outside the @app.entrypoint: register models in its body or in a helper it calls"
            )
        if isinstance(llm, GovernedChatModel):
            raise TypeError(f"model {llm_id!r} is already governed; pass the model it wraps to app.llm")
        registered = LangChainModelAdapter(llm) if isinstance(llm, BaseChatModel) else llm
        secure = super().llm(registered, llm_id=llm_id)
        return GovernedChatModel(llm_id=llm_id, secure=secure)

    def tool(self, func: Any = None, **options: Any) -> Any:
        """`@app.tool` for functions (see the base SDK), or `app.tool(langchain_tool, sensitive=..., ...)`.

        Returns the governed tool, a LangChain tool whose every call goes through the OE; a LangChain tool
        passed in is itself made governed, so handing either to `create_react_agent` or `ToolNode` is safe.
        """
        if isinstance(func, BaseTool):
            self._register_langchain_tool(func, **options)
            return govern_in_place(func, GovernedTool.from_schema(self._tools[func.name].schema()))
        if func is None:
            return lambda fn: self.tool(fn, **options)
        super().tool(func, **options)
        name = options.get("name") or func.__name__
        return GovernedTool.from_schema(self._tools[name].schema())

    def _register_langchain_tool(
        self,
        tool: BaseTool,
        *,
        is_local: bool = False,
        sensitive: bool = False,
        timeout_s: float = base.DEFAULT_TOOL_TIMEOUT_S,
        required_secrets: Iterable[str] = (),
        **unsupported: Any,
    ) -> None:
        if unsupported:
            raise ToolDefinitionError(
                f"tool {tool.name!r}: {', '.join(sorted(unsupported))} cannot be set on a LangChain tool; "
                "set its name and description on the tool itself"
            )
        if tool.name in self.tools:
            raise ToolDefinitionError(f"tool {tool.name!r} is registered twice; rename one of them")
        if not base._TOOL_NAME.match(tool.name):
            raise ToolDefinitionError(
                f"tool name {tool.name!r} must be 1-64 characters of letters, digits, '_' or '-'"
            )
        spec = tool_spec_from_langchain(tool, is_local=is_local, sensitive=sensitive, timeout_s=timeout_s)
        # The env the body may see in the Tool Pod (issue 36), checked as for a function tool.
        secrets = base._validated_secrets(tool.name, required_secrets, is_local=is_local)
        spec = dataclasses.replace(spec, required_secrets=secrets)
        if not spec.description:
            raise ToolDefinitionError(f"tool {tool.name!r} has no description; the model needs one")
        self._tools[tool.name] = spec

    def langchain_tools(
        self, context: RequestContext, *, names: Iterable[str] | None = None
    ) -> list[GovernedTool]:
        """The Agent's tools (connectors and this App's) as LangChain tools whose calls go through the OE."""
        surface = {str(entry["name"]): entry for entry in context.tools}
        wanted = list(surface) if names is None else list(names)
        missing = [name for name in wanted if name not in surface]
        if missing:
            raise ToolDefinitionError(
                f"no tool named {', '.join(map(repr, missing))} in this Agent; it has "
                f"{', '.join(sorted(surface)) or 'none'} (connector tools come from the Agent's Connectors)"
            )
        return [GovernedTool.from_schema(surface[name]) for name in wanted]
