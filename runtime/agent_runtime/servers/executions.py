"""Runs of the entrypoint in the AER (B-01, B-02, B-15), free of HTTP.

`run_execution` is one run: set the context, build the runnable, await it on the input, and turn what
happened into the callback the OE gets. `ExecutionRunner` keeps each run as a tracked task, refuses a second
start of a running execution, sends the callback, and drains at shutdown. A run can fail in any way it
likes: the runner catches everything but its own cancellation, so the AER keeps serving the others.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Sequence
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from agent_runtime.logging_config import log_context
from agent_runtime.protocol import (
    ENTRYPOINT_ERROR,
    INVALID_RESULT,
    PLATFORM_FAILURE,
    AERExecuteRequest,
    CallbackStatus,
    CallError,
    ExecutorCallback,
)
from agent_runtime.sdk import App, OEApi, PlatformFailure, RequestContext
from agent_runtime.sdk.calls import resume_scope
from agent_runtime.sdk.context import RunState, entrypoint_scope, run_scope
from agent_runtime.sdk.errors import SuspendRequested
from agent_runtime.sdk.runnable import run_runnable
from agent_runtime.sdk.secure import confirm_replies, report_suspend
from agent_runtime.sdk.tracking import ExecutionDraining, call_tracker_var
from agent_runtime.servers.drain import WorkRegistry
from agent_runtime.servers.metrics import ExecutionMetrics

logger = logging.getLogger(__name__)

_MESSAGE_LIMIT = 500
# After a drain gives up on a run, its FAILED callback gets this long before the process exits.
CANCELLED_CALLBACK_TIMEOUT_S = 2.0


class ExecutionConflictError(Exception):
    """The execution is already running in this process (409)."""


class WorkspaceMismatchError(Exception):
    """The execution names another workspace than this runtime's APP_ID (404, AU-02)."""


def _failed(execution_id: str, *, category: str, explanation: str) -> ExecutorCallback:
    return ExecutorCallback(
        execution_id=execution_id,
        status=CallbackStatus.FAILED,
        error=CallError(category=category, explanation=explanation[:16_384]),
    )


def _suspended(execution_id: str, signal: SuspendRequested) -> ExecutorCallback:
    try:
        metadata = to_jsonable_python(signal.metadata())
    except PydanticSerializationError:
        return _failed(
            execution_id,
            category=ENTRYPOINT_ERROR,
            explanation="app.suspend was given a payload that is not JSON-serializable",
        )
    return ExecutorCallback(execution_id=execution_id, status=CallbackStatus.SUSPENDED, metadata=metadata)


def _short(exc: BaseException) -> str:
    text = str(exc)
    text = text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _verdict(run: RunState, *, execution_id: str, result: Any) -> ExecutorCallback:
    """A run that returned: a swallowed platform failure or suspension still decides the outcome (LG-08)."""
    if run.platform_failure is not None:
        return _failed(execution_id, category=PLATFORM_FAILURE, explanation=run.platform_failure)
    if run.suspension is not None:
        return _suspended(execution_id, run.suspension)
    try:
        value = to_jsonable_python(result)
    except PydanticSerializationError:
        return _failed(
            execution_id,
            category=INVALID_RESULT,
            explanation=f"the entrypoint returned a {type(result).__name__}, which is not JSON-serializable",
        )
    return ExecutorCallback(execution_id=execution_id, status=CallbackStatus.COMPLETED, result=value)


def request_context(request: AERExecuteRequest, *, tools: Sequence[dict[str, Any]]) -> RequestContext:
    # The agentRef tools the OE sent with the run (issue 38), after the bundle's and the tenant's own; a
    # name those already use is theirs in the list (the OE still routes the call as the agentRef).
    names = {tool.get("name") for tool in tools}
    tools = [*tools, *(ref for ref in request.agent_refs if ref.get("name") not in names)]
    return RequestContext(
        execution_id=request.execution_id,
        session_id=request.session_id,
        workspace_id=request.workspace_id,
        user_id=request.user_id,
        org_id=request.org_id,
        resume=request.resume,
        tools=tuple(tools),
        memory_credential=request.memory_credential,
        stream_mode=tuple(request.stream_mode),
    )


async def run_execution(
    app: App, request: AERExecuteRequest, *, oe: OEApi, tools: Sequence[dict[str, Any]]
) -> ExecutorCallback:
    """One run of the entrypoint: build, run on `request.input`, and say how it ended."""
    execution_id = request.execution_id
    context = request_context(request, tools=tools)
    local_tools = {name: spec for name, spec in app.tools.items() if spec.is_local}
    with (
        run_scope(context, oe=oe, local_tools=local_tools) as run,
        resume_scope(request.suspend_replies),
        entrypoint_scope(),
    ):
        try:
            result = await run_runnable(app.build(context), request.input)
            # Replayed agent-level suspensions are confirmed before the run may say it completed.
            await confirm_replies(run)
        except PlatformFailure as failure:
            return _failed(
                execution_id, category=PLATFORM_FAILURE, explanation=run.platform_failure or failure.message
            )
        except SuspendRequested as signal:
            if run.platform_failure is not None:
                return _failed(execution_id, category=PLATFORM_FAILURE, explanation=run.platform_failure)
            if signal.pending is not None and run.suspension is None:
                # `app.suspend` in agent code: the OE holds it at its step before the run says SUSPENDED.
                try:
                    signal = await report_suspend(run, signal)
                except PlatformFailure as failure:
                    explanation = run.platform_failure or failure.message
                    return _failed(execution_id, category=PLATFORM_FAILURE, explanation=explanation)
            return _suspended(execution_id, signal)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # SystemExit too: tenant code must not stop the AER
            if run.platform_failure is not None:
                return _failed(execution_id, category=PLATFORM_FAILURE, explanation=run.platform_failure)
            logger.error(
                "execution %s: the entrypoint raised %s:\n%s",
                execution_id,
                type(exc).__name__,
                "".join(traceback.format_exception(exc)).rstrip(),
            )
            return _failed(execution_id, category=ENTRYPOINT_ERROR, explanation=_short(exc))
        return _verdict(run, execution_id=execution_id, result=result)


class ExecutionRunner:
    """The executions this AER process runs now, one task each."""

    def __init__(
        self,
        *,
        app: App,
        oe: OEApi,
        tools: Sequence[dict[str, Any]],
        metrics: ExecutionMetrics,
        app_id: str | None = None,
        work: WorkRegistry | None = None,
    ) -> None:
        self._app = app
        self._oe = oe
        self._tools = tuple(tools)
        self._metrics = metrics
        self._app_id = app_id or None
        # The turn and its local tool bodies are tracked work, for POST /drain and /interrupt/call (DR-12).
        self._work = work
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def is_running(self, execution_id: str) -> bool:
        return execution_id in self._tasks

    @property
    def running(self) -> int:
        return len(self._tasks)

    def start(self, request: AERExecuteRequest) -> None:
        """Start the run as a task and return at once; refuse another workspace or a duplicate."""
        if self._app_id is not None and request.workspace_id != self._app_id:
            raise WorkspaceMismatchError(request.workspace_id)
        execution_id = request.execution_id
        if self._work is not None and self._work.draining(execution_id) is not None:
            raise ExecutionDraining(execution_id)  # before the conflict: a drained run may still be ending
        if execution_id in self._tasks:
            raise ExecutionConflictError(execution_id)
        # Raises ExecutionDraining (409) once a drain of it was accepted here (DR-10).
        turn = self._work.admit(execution_id, None, cancellable=True) if self._work is not None else None
        task = asyncio.get_running_loop().create_task(self._execute(request), name=execution_id)
        self._tasks[execution_id] = task
        if turn is not None and self._work is not None:
            self._work.attach(turn, task)

        def forget(done: asyncio.Task[None]) -> None:
            if self._tasks.get(execution_id) is done:
                del self._tasks[execution_id]

        task.add_done_callback(forget)

    async def _execute(self, request: AERExecuteRequest) -> None:
        execution_id = request.execution_id
        call_tracker_var.set(self._work)  # this task's own context: its local tool bodies are tracked
        with log_context(execution_id=execution_id, step=None):
            logger.info("execution %s started (resume=%s)", execution_id, request.resume)
            self._metrics.started()
            started = time.perf_counter()
            try:
                callback = await run_execution(self._app, request, oe=self._oe, tools=self._tools)
            except asyncio.CancelledError:
                elapsed = time.perf_counter() - started
                self._metrics.finished(status=CallbackStatus.FAILED.value, duration_s=elapsed)
                drained = self._work.draining(execution_id) if self._work is not None else None
                # Drained: the OE cancelled it and refuses (and audits) the callback; it is told anyway.
                await self._report_cancelled(execution_id, drained=drained)
                raise
            self._metrics.finished(status=callback.status.value, duration_s=time.perf_counter() - started)
            logger.info("execution %s ended %s", execution_id, callback.status.value)
            try:
                await self._oe.callback(callback)
            except PlatformFailure as failure:
                logger.error("execution %s: OE never acknowledged the callback: %s", execution_id, failure)

    async def _report_cancelled(self, execution_id: str, *, drained: str | None = None) -> None:
        why = f"the run was drained ({drained})" if drained else "the AER shut down before the run finished"
        callback = _failed(execution_id, category=PLATFORM_FAILURE, explanation=why)
        try:
            async with asyncio.timeout(CANCELLED_CALLBACK_TIMEOUT_S):
                await self._oe.callback(callback)
        except (TimeoutError, PlatformFailure):
            logger.log(
                logging.INFO if drained else logging.ERROR,
                "execution %s: cancelled (%s); the OE did not take the callback",
                execution_id,
                why,
            )

    async def shutdown(self, timeout_s: float) -> None:
        """SIGTERM: wait up to `timeout_s` for the runs in flight, then cancel the rest (each reports FAILED).

        Not the per-execution drain of `POST /drain` (DR-14): this one stops the whole process.
        """
        tasks = list(self._tasks.values())
        if not tasks:
            return
        logger.info("waiting up to %.0f s for %d execution(s) in flight", timeout_s, len(tasks))
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        if not pending:
            return
        logger.warning("cancelling %d execution(s) still running after %.0f s", len(pending), timeout_s)
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=CANCELLED_CALLBACK_TIMEOUT_S + 1)
