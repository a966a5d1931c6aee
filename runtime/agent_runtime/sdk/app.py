"""The tenant-facing SDK: an `App` holds the agent's tools, its entrypoint and its models."""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Coroutine, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from agent_runtime.contract import is_platform_env
from agent_runtime.sdk.context import (
    RequestContext,
    RunState,
    current_run,
    entrypoint_active,
    entrypoint_scope,
    run_scope,
)
from agent_runtime.sdk.errors import SuspendRequested
from agent_runtime.sdk.input_schema import ToolDefinitionError, arguments_model, input_schema
from agent_runtime.sdk.runnable import Runnable, as_runnable, is_run_function
from agent_runtime.sdk.secure import SecureWrappedLLM, agent_suspend, call_tool
from agent_runtime.sdk.tool_spec import DEFAULT_TOOL_TIMEOUT_S, ToolSpec

if TYPE_CHECKING:
    from agent_runtime.sdk.memory import MemoryClient

F = TypeVar("F", bound=Callable[..., Any])

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LLM_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,256}$")


def _validated_secrets(tool_name: str, names: Iterable[str], *, is_local: bool) -> tuple[str, ...]:
    secrets = tuple(names)
    if isinstance(names, str):
        raise ToolDefinitionError(
            f"tool {tool_name!r}: required_secrets must be a list of env names, e.g. [{names!r}]"
        )
    for name in secrets:
        if not _ENV_NAME.match(name):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: required_secrets entry {name!r} is not an environment variable name"
            )
        if is_platform_env(name):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: required_secrets entry {name!r} is a platform variable name, "
                "never a tenant secret; rename the secret's env var"
            )
    if secrets and is_local:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: a local tool runs in the AER, which receives LLM keys only; "
            "drop is_local=True so it runs in the Tool Pod with its required_secrets"
        )
    return secrets


def _agent_run() -> RunState | None:
    """The run whose agent code (not a tool body, not the start-up construction) is calling, if any."""
    if not entrypoint_active():
        return None
    try:
        run = current_run()
    except RuntimeError:
        return None
    return None if run.context.construction else run


class App:
    """A tenant agent: `@app.tool` functions and one `@app.entrypoint`. Name it in AGENT_ENTRYPOINT."""

    def __init__(self, name: str = "agent") -> None:
        self.name = name
        self._tools: dict[str, ToolSpec] = {}
        self._entrypoint: Callable[..., Any] | None = None
        self._llms: dict[str, Any] = {}

    @overload
    def tool(self, func: F) -> F: ...

    @overload
    def tool(
        self,
        func: None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        is_local: bool = False,
        sensitive: bool = False,
        required_secrets: Iterable[str] = (),
        timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        func: F | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        is_local: bool = False,
        sensitive: bool = False,
        required_secrets: Iterable[str] = (),
        timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
    ) -> F | Callable[[F], F]:
        """Register a tool: `@app.tool` or `@app.tool(name=..., is_local=..., ...)`.

        The description defaults to the docstring and the input schema comes from the type hints.
        `is_local=False` (the default) runs the tool in the Tool Pod, where the tenant's secrets are.
        """

        def register(fn: F) -> F:
            self._register_tool(
                fn,
                name=name,
                description=description,
                is_local=is_local,
                sensitive=sensitive,
                required_secrets=required_secrets,
                timeout_s=timeout_s,
            )
            return fn

        return register(func) if func is not None else register

    def _register_tool(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None,
        description: str | None,
        is_local: bool,
        sensitive: bool,
        required_secrets: Iterable[str],
        timeout_s: float,
    ) -> None:
        if not callable(fn):
            raise ToolDefinitionError(f"@app.tool decorates functions, got {type(fn).__name__}")
        tool_name = name or fn.__name__
        if not _TOOL_NAME.match(tool_name):
            raise ToolDefinitionError(
                f"tool name {tool_name!r} must be 1-64 characters of letters, digits, '_' or '-'; "
                "pass name=... to @app.tool"
            )
        if tool_name in self._tools:
            raise ToolDefinitionError(f"tool {tool_name!r} is registered twice; give one of them name=...")
        text = (description if description is not None else inspect.getdoc(fn) or "").strip()
        if not text:
            raise ToolDefinitionError(
                f"tool {tool_name!r} has no description; give the function a docstring or pass description="
            )
        if not timeout_s > 0:
            raise ToolDefinitionError(f"tool {tool_name!r}: timeout_s must be > 0 seconds, got {timeout_s!r}")
        model = arguments_model(fn, tool_name=tool_name)
        self._tools[tool_name] = ToolSpec(
            name=tool_name,
            description=text,
            func=fn,
            arguments=model,
            input_schema=input_schema(model),
            is_local=is_local,
            sensitive=sensitive,
            required_secrets=_validated_secrets(tool_name, required_secrets, is_local=is_local),
            timeout_s=float(timeout_s),
            is_async=inspect.iscoroutinefunction(fn),
        )

    def entrypoint(self, func: F) -> F:
        """Register the agent's builder: `def build(ctx: RequestContext)` returning an async `run(input)` or
        an object with `async ainvoke(input)`. The AER builds and runs it for each execution; the Tool Pod
        builds it once at start-up to find the `app.llm` registrations. An `async def` entrypoint is the run
        function itself (an agent without models: the Tool Pod then finds none).
        """
        if not callable(func):
            raise ToolDefinitionError(f"@app.entrypoint decorates a function, got {type(func).__name__}")
        if self._entrypoint is not None:
            raise ToolDefinitionError(
                f"app {self.name!r} already has an entrypoint ({self._entrypoint.__name__}); keep only one"
            )
        self._entrypoint = func
        return func

    @property
    def entrypoint_function(self) -> Callable[..., Any] | None:
        """The function registered with `@app.entrypoint`, if any."""
        return self._entrypoint

    @property
    def tools(self) -> Mapping[str, ToolSpec]:
        """Every registered tool by name (read-only)."""
        return MappingProxyType(self._tools)

    def llm(self, llm: Any, *, llm_id: str = "default") -> SecureWrappedLLM:
        """Register a model under `llm_id` and return it wrapped: its calls go through the OE (B-10, B-13).

        Call it while the entrypoint runs (its body, or a helper it calls); anywhere else is a RuntimeError
        naming the call site, since the Tool Pod finds models only by building the entrypoint.
        """
        if not entrypoint_active():
            caller = sys._getframe(1)
            site = f"{caller.f_code.co_filename}:{caller.f_lineno}"
            raise RuntimeError(
                f"app.llm(llm_id={llm_id!r}) called at {site}, outside "
                "the @app.entrypoint: register models in the entrypoint's body or in a helper it calls, "
                "not at module top level, in a tool body, or from other code"
            )
        if not isinstance(llm_id, str) or not _LLM_ID.match(llm_id):
            raise ValueError(f"llm_id {llm_id!r} must be 1-256 letters, digits or '_.:-'")
        self._llms[llm_id] = llm
        return SecureWrappedLLM(llm, llm_id=llm_id)

    @property
    def memory(self) -> MemoryClient:
        """The Agent's Memory server (AGENTIC_MEMORY_URL), scoped to the running execution's org and user."""
        from agent_runtime.sdk.memory import shared_memory_client

        return shared_memory_client()

    @property
    def llms(self) -> Mapping[str, Any]:
        """The registered models by llm_id (read-only)."""
        return MappingProxyType(self._llms)

    def suspend(self, reason: str, payload: Any = None) -> dict[str, Any]:
        """Stop here and wait for a human (B-09); `payload` (JSON-serializable) says what to decide.

        In a tool it never returns: the tool's step suspends the execution, and once a reviewer decides,
        that step answers `{decision, reviewer_notes}` (the tool is not run again). In agent code it is a
        step of its own: the first time it ends the run SUSPENDED; in the run that resumes the execution
        it returns the human's decision, `{"decision": "approved" | "rejected", "reviewer_notes": ...}`,
        so the agent goes on from there instead of suspending again.
        """
        run = _agent_run()
        if run is None:
            raise SuspendRequested(reason, payload)
        return agent_suspend(run, reason, payload)

    def call_tool(self, name: str, args: Mapping[str, Any] | None = None) -> Coroutine[Any, Any, Any]:
        """`await app.call_tool(name, args)`: any tool (local, remote or connector), approved by the OE first.

        The step is taken when the call is made, so calls gathered together are numbered in written order.
        """
        return call_tool(name, args, local_tools=self._tools)

    def build(self, context: RequestContext) -> Runnable:
        """The runnable for one execution: the builder's result, or an `async def` entrypoint itself."""
        entry = self._entrypoint
        if entry is None:
            raise RuntimeError(f"app {self.name!r} has no @app.entrypoint")
        if is_run_function(entry):
            return entry
        return as_runnable(entry(context))

    def construct(self, context: RequestContext) -> None:
        """Build once without running anything, to register the models (B-11); on failure the model registry
        is put back as it was and the exception propagates."""
        if not context.construction:
            raise ValueError("construct() needs a construction context (construction=True)")
        if self._entrypoint is None or is_run_function(self._entrypoint):
            return
        before = dict(self._llms)
        try:
            with run_scope(context, oe=None), entrypoint_scope():
                self.build(context)
        except BaseException:
            self._llms.clear()
            self._llms.update(before)
            raise

    def remote_tools(self) -> list[ToolSpec]:
        """Tools that run in the Tool Pod."""
        return [spec for spec in self._tools.values() if not spec.is_local]

    def local_tools(self) -> list[ToolSpec]:
        """Tools that run inside the AER."""
        return [spec for spec in self._tools.values() if spec.is_local]
