"""`app.deep_agent(...)` (LG-17): LangChain's deepagents, every model and tool call governed by the OE.

    app = App(app_name="research")
    app.enable_deep_agents()                      # at import: the file tools the Tool Pod serves

    @app.entrypoint
    def build(ctx):
        return app.deep_agent(ChatOpenAI(...), tools=[search], subagents=[{"name": ..., ...}],
                              skills=["/skills/"])

- the models (the agent's and each subagent's) are registered with `app.llm`, so each call is an OE step
  run in the Tool Pod; a model already governed is used as it is;
- the tools must be governed (`app.tool(...)`'s or `app.langchain_tools(ctx)`'s): an ungoverned one is
  refused here, by name, rather than run unseen;
- the virtual file system is `AgentEngineToolPodBackend`: each operation a governed Tool Pod call, the
  files in the Tool Pod; skills are found through it, so discovery (immediate child directories of each
  source holding a SKILL.md, deepagents' own rule) runs against the Tool Pod's files. The SDK forwards
  `skills` untouched; the files root is resolved in the Tool Pod at its start-up build, never at import;
- the `task` tool runs a subagent inside the parent's tool call; its calls carry its name (subagents.py).
  Each `write_todos` (the plan) is first a governed step of its own (plan_audit.py), for the lead and each
  declared subagent, so the audit holds the plan and a policy may name it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from deepagents import create_deep_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool

from agent_runtime.langgraph.backends.tool_sandbox import files_root
from agent_runtime.langgraph.backends.toolpod import AgentEngineToolPodBackend
from agent_runtime.langgraph.durable_tools import GovernedTool
from agent_runtime.langgraph.plan_audit import PlanAudit
from agent_runtime.langgraph.secure_llm import GovernedChatModel
from agent_runtime.sdk.context import active_run
from agent_runtime.sdk.input_schema import ToolDefinitionError


class App(Protocol):
    """What the deep agent needs of the LangGraph App (runtime.py imports this module, not the reverse)."""

    name: str

    @property
    def environ(self) -> Mapping[str, str]: ...
    @property
    def tools(self) -> Mapping[str, Any]: ...
    @property
    def deep_agents_enabled(self) -> bool: ...
    def llm(self, llm: Any, *, llm_id: str = ...) -> GovernedChatModel: ...
    def checkpointer(self) -> Any: ...


DEFAULT_LLM_ID = "deep-agent"


def _governed_model(app: App, model: Any, *, llm_id: str) -> GovernedChatModel:
    if isinstance(model, GovernedChatModel):
        return model
    if isinstance(model, BaseChatModel):
        return app.llm(model, llm_id=llm_id)
    raise ToolDefinitionError(
        f"deep agent model {llm_id!r}: pass a LangChain chat model (or app.llm's), not {type(model).__name__}"
    )


def _governed_tools(app: App, tools: Iterable[Any], *, owner: str) -> list[BaseTool]:
    out: list[BaseTool] = []
    for tool in tools:
        name = getattr(tool, "name", getattr(tool, "__name__", repr(tool)))
        if not isinstance(tool, BaseTool) or (name not in app.tools and not _is_surface_tool(tool)):
            raise ToolDefinitionError(
                f"{owner}: tool {name!r} is not governed; register it with app.tool(...) and pass what it "
                "returns (or a tool of app.langchain_tools(ctx))"
            )
        out.append(tool)
    return out


def _is_surface_tool(tool: BaseTool) -> bool:
    return isinstance(tool, GovernedTool)


def _subagent(app: App, spec: Mapping[str, Any]) -> dict[str, Any]:
    name = str(spec.get("name") or "")
    if not name:
        raise ToolDefinitionError("a deep agent's subagent needs a name")
    if "runnable" in spec or "graph_id" in spec:
        raise ToolDefinitionError(
            f"subagent {name!r}: compiled and async subagents are not supported; declare it with "
            "name, description, system_prompt, tools and model"
        )
    built = dict(spec)
    built["middleware"] = [*built.get("middleware", ()), PlanAudit()]
    if "model" in built:
        built["model"] = _governed_model(app, built["model"], llm_id=f"subagent-{name}")
    if "tools" in built:
        built["tools"] = _governed_tools(app, built["tools"], owner=f"subagent {name!r}")
    return built


def build_deep_agent(
    app: App,
    model: Any,
    *,
    tools: Sequence[Any] = (),
    subagents: Sequence[Mapping[str, Any]] = (),
    skills: list[str] | None = None,
    llm_id: str = DEFAULT_LLM_ID,
    checkpointer: Any = None,
    **options: Any,
) -> Any:
    """The compiled deep agent (see the module doc); `options` go to `create_deep_agent` as they are."""
    if not app.deep_agents_enabled:
        raise ToolDefinitionError(
            "app.deep_agent needs the Tool Pod's file tools: call app.enable_deep_agents() at import"
        )
    options["middleware"] = [*options.get("middleware", ()), PlanAudit()]
    for refused in ("backend", "model"):
        if refused in options:
            raise ToolDefinitionError(f"app.deep_agent sets {refused!r} itself")
    run = active_run()
    if run is not None and run.context.construction:
        files_root(app.name, env=app.environ)  # the Tool Pod's start-up build: the root exists from now
    return create_deep_agent(
        _governed_model(app, model, llm_id=llm_id),
        tools=_governed_tools(app, tools, owner="the deep agent"),
        subagents=[_subagent(app, spec) for spec in subagents],
        skills=skills,
        backend=AgentEngineToolPodBackend(),
        checkpointer=checkpointer if checkpointer is not None else app.checkpointer(),
        **options,
    )
