"""Per-execution context (B-03, B-04, B-06, B-10), held in context variables.

One `RunState` per run of the entrypoint: its `RequestContext`, the OE it reports to, the local tools it may
run, and the step counter. Context variables follow the run into child tasks and into the worker threads
that run synchronous tools, so every intercepted call and every log record there knows its execution.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from agent_runtime.logging_config import execution_id_var, step_var

if TYPE_CHECKING:
    from agent_runtime.sdk.errors import SuspendRequested
    from agent_runtime.sdk.oe_client import OEApi
    from agent_runtime.sdk.tool_spec import ToolSpec


@dataclass(frozen=True)
class RequestContext:
    """What the entrypoint is told about the execution it builds for. `construction` marks the Tool Pod's
    start-up build (B-11), during which no tool body or model call may run."""

    execution_id: str
    session_id: str | None = None
    workspace_id: str = ""
    user_id: str | None = None
    org_id: str | None = None
    resume: bool = False
    # `{name, description, inputSchema}` of every tool the agent may offer a model.
    tools: tuple[dict[str, Any], ...] = ()
    construction: bool = False
    # The OE's memory statement for this run (see MemoryClient); never shown.
    memory_credential: str | None = field(default=None, repr=False)
    # LangGraph stream modes the client asked for (issue 32): the graph runs with `astream`.
    stream_mode: tuple[str, ...] = ()


@dataclass
class RunState:
    """One run of the entrypoint. Shared, not copied, by the tasks and threads the run starts."""

    context: RequestContext
    oe: OEApi | None = None
    local_tools: Mapping[str, ToolSpec] = field(default_factory=lambda: MappingProxyType({}))
    # Set by the first platform failure: every later call in this turn fails too (LG-08).
    platform_failure: str | None = None
    # The first suspension the OE confirmed; it stands even if agent code swallows the signal.
    suspension: SuspendRequested | None = None
    # A framework that resumes from its own checkpoint (LangGraph) numbers the steps itself, so a resumed
    # run gives each replayed call the number it had (Decision 4); None: count 1, 2, 3...
    step_source: Callable[[], int] | None = field(default=None, repr=False)
    _steps: Iterator[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    def allocate_step(self) -> int:
        """The next step number, 1, 2, 3... in the order calls are made (Decision 4)."""
        if self.step_source is not None:
            return self.step_source()
        return next(self._steps)


_run_var: ContextVar[RunState | None] = ContextVar("agent_runtime_run", default=None)
_entrypoint_var: ContextVar[bool] = ContextVar("agent_runtime_in_entrypoint", default=False)


def current_run() -> RunState:
    """The run this code belongs to; RuntimeError outside one."""
    run = _run_var.get()
    if run is None:
        raise RuntimeError(
            "no execution is running here: tool and model calls go through the Orchestration Engine and "
            "are made only inside the runnable the @app.entrypoint returns"
        )
    return run


def active_run() -> RunState | None:
    """The run this code belongs to, or None outside one."""
    return _run_var.get()


def current_context() -> RequestContext:
    """The `RequestContext` of the running execution; RuntimeError outside one."""
    return current_run().context


@contextlib.contextmanager
def run_scope(
    context: RequestContext, *, oe: OEApi | None, local_tools: Mapping[str, ToolSpec] | None = None
) -> Iterator[RunState]:
    """Make `context` the current execution for the block; logs inside carry its execution_id."""
    run = RunState(context=context, oe=oe, local_tools=MappingProxyType(dict(local_tools or {})))
    run_token = _run_var.set(run)
    execution_token = execution_id_var.set(context.execution_id)
    step_token = step_var.set(None)
    try:
        yield run
    finally:
        step_var.reset(step_token)
        execution_id_var.reset(execution_token)
        _run_var.reset(run_token)


calling_agent_var: ContextVar[str | None] = ContextVar("agent_runtime_calling_agent", default=None)


@contextlib.contextmanager
def calling_agent_scope(name: str | None) -> Iterator[None]:
    """Name the agent (of a multi-agent graph) whose calls start in this scope; the OE audits it."""
    token = calling_agent_var.set(name)
    try:
        yield
    finally:
        calling_agent_var.reset(token)


@contextlib.contextmanager
def step_scope(step: int) -> Iterator[None]:
    """Tag the records logged during one intercepted call with its step."""
    token = step_var.set(step)
    try:
        yield
    finally:
        step_var.reset(token)


@contextlib.contextmanager
def entrypoint_scope() -> Iterator[None]:
    """Mark the entrypoint's dynamic extent: the builder and the run it returns (B-10)."""
    token = _entrypoint_var.set(True)
    try:
        yield
    finally:
        _entrypoint_var.reset(token)


@contextlib.contextmanager
def tool_body_scope() -> Iterator[None]:
    """A tool body is outside the entrypoint, even when the entrypoint's run called it (B-10)."""
    token = _entrypoint_var.set(False)
    try:
        yield
    finally:
        _entrypoint_var.reset(token)


def entrypoint_active() -> bool:
    """True while the entrypoint (not a tool body) is on the call stack."""
    return _entrypoint_var.get()
