"""SecureToolWrapper and SecureWrappedLLM: every tool and model call asks the OE first (B-05, B-13).

The OE answers one of three ways (OE-06): a denial, "run it yourself" (`route_to: "callback"`, local tools
only) or the call's final outcome. A local tool body runs here, in the AER's own call stack, only after the
OE's approval, and its outcome is reported back before the agent sees it. Without an answer from the OE
nothing runs: no tool body, no model call.

Step numbers are allocated when a call is made, before its first await, so `asyncio.gather` of several
calls numbers them in the order they were written (Decision 4), whatever order they finish in.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from agent_runtime.protocol import (
    AGENT_SUSPEND,
    INVOKE_LLM,
    REPLAY_DIVERGED,
    CallError,
    CallStatus,
    LLMDelta,
    ToolExecuteAnswer,
    ToolExecuteRequest,
    ToolResultRequest,
    validation_problems,
)
from agent_runtime.sdk.calls import call_scope, resume_state
from agent_runtime.sdk.context import (
    RunState,
    calling_agent_var,
    current_run,
    step_scope,
    tool_body_scope,
)
from agent_runtime.sdk.errors import (
    PlatformFailure,
    PolicyDeniedException,
    SuspendRequested,
    ToolExecutionError,
)
from agent_runtime.sdk.tool_messages import TOOL_MESSAGE, tool_message
from agent_runtime.sdk.tracking import CallInterrupted, ExecutionDraining, call_tracker_var, run_tracked

if TYPE_CHECKING:
    from agent_runtime.sdk.tool_spec import ToolSpec

logger = logging.getLogger(__name__)

# Categories of a local tool's failure; the Tool Pod reports the same ones for its tools.
UNKNOWN_TOOL = "unknown_tool"
INVALID_ARGUMENTS = "invalid_arguments"
TOOL_ERROR = "tool_error"
TIMEOUT = "timeout"

Call = Coroutine[Any, Any, Any]


def _admit(what: str) -> RunState:
    """The current run, unless no call may be made here (outside a run, or during construction)."""
    run = current_run()
    if run.context.construction:
        raise RuntimeError(
            f"{what} during construction: the Tool Pod builds the entrypoint once at start-up only to find "
            "its app.llm registrations, and no tool body or model call may run then; make calls inside the "
            "runnable the entrypoint returns"
        )
    return run


def _jsonable(value: Any, *, what: str) -> Any:
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError:
        raise TypeError(f"{what} must be JSON-serializable") from None


def _check_answer(request: ToolExecuteRequest, answer: ToolExecuteAnswer) -> None:
    if answer.step != request.step:
        raise PlatformFailure(f"the OE answered step {answer.step} to the call at step {request.step}")
    if answer.proceed and answer.route_to is None and answer.status is None:
        raise PlatformFailure(f"the OE's answer at step {request.step} has neither a route nor an outcome")


async def _guard(run: RunState, call: Coroutine[Any, Any, Any]) -> Any:
    """Await one exchange with the OE; a platform failure poisons the rest of the turn (LG-08)."""
    if run.platform_failure is not None:
        call.close()
        raise PlatformFailure(f"an earlier platform failure ended this turn: {run.platform_failure}")
    try:
        return await call
    except PlatformFailure as exc:
        run.platform_failure = run.platform_failure or exc.message
        raise


async def _ask(run: RunState, request: ToolExecuteRequest) -> ToolExecuteAnswer:
    async def exchange() -> ToolExecuteAnswer:
        if run.oe is None:
            raise PlatformFailure("no Orchestration Engine is configured for this run")
        answer = await run.oe.tool_execute(request)
        _check_answer(request, answer)
        return answer

    await confirm_replies(run)
    result: ToolExecuteAnswer = await _guard(run, exchange())
    return result


def agent_suspend(run: RunState, reason: str, payload: Any) -> dict[str, Any]:
    """`app.suspend` in agent code: a step of its own. On a resumed run whose OE sent the human's answer
    for this step, return it (`{decision, reviewer_notes}`); otherwise raise the signal the runner reports
    to the OE (which holds the step) before it calls back SUSPENDED."""
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("app.suspend(reason) needs a non-empty reason: say what the human must decide")
    args = {"reason": reason, "payload": _jsonable(payload, what="app.suspend's payload")}
    step = run.allocate_step()
    request = ToolExecuteRequest(
        execution_id=run.context.execution_id, step=step, tool=AGENT_SUSPEND, args=args
    )
    state = resume_state()
    reply = state.replies.get(step) if state is not None else None
    if state is not None and reply is not None and (reply.reason, reply.payload) == (reason, args["payload"]):
        logger.info("cached result: tool=%s step=%d", AGENT_SUSPEND, step)
        state.unconfirmed.append((request, reply))
        return {"decision": reply.decision, "reviewer_notes": reply.reviewer_notes}
    raise SuspendRequested(reason, payload, step=step, tool=AGENT_SUSPEND, pending=request)


async def confirm_replies(run: RunState) -> None:
    """Tell the OE about the agent-level suspensions this run answered from its replies, in order, before
    anything else is asked; the OE answers each from its cache or fails the diverged execution."""
    state = resume_state()
    if state is None or not state.unconfirmed:
        return
    async with state.lock():
        while state.unconfirmed:
            request, reply = state.unconfirmed.pop(0)

            async def exchange(request: ToolExecuteRequest = request) -> ToolExecuteAnswer:
                if run.oe is None:
                    raise PlatformFailure("no Orchestration Engine is configured for this run")
                answer = await run.oe.tool_execute(request)
                _check_answer(request, answer)
                return answer

            answer: ToolExecuteAnswer = await _guard(run, exchange())
            expected = reply.answer()
            if answer.status == "success" and answer.result == expected:
                continue
            _raise_if_diverged(run, answer)
            failure = (
                f"the OE answered the replayed app.suspend at step {request.step} with "
                f"{answer.status or 'no outcome'}, not the decision this run was given"
            )
            run.platform_failure = run.platform_failure or failure
            raise PlatformFailure(failure)


def _raise_if_diverged(run: RunState, answer: ToolExecuteAnswer) -> None:
    if answer.status == "error" and answer.error is not None and answer.error.category == REPLAY_DIVERGED:
        _outcome(run, answer, tool=AGENT_SUSPEND)  # raises the platform failure


async def report_suspend(run: RunState, signal: SuspendRequested) -> SuspendRequested:
    """Have the OE hold an agent-level suspension at its step; returns the OE-confirmed signal."""
    assert signal.pending is not None
    answer = await _ask(run, signal.pending)
    if answer.status == "suspend":
        confirmed = SuspendRequested.from_result(answer.result, step=answer.step, tool=AGENT_SUSPEND)
        run.suspension = run.suspension or confirmed
        return confirmed
    _raise_if_diverged(run, answer)
    failure = (
        f"the OE answered app.suspend at step {signal.pending.step} with "
        f"{answer.status or 'no outcome'} instead of holding it for a human"
    )
    run.platform_failure = run.platform_failure or failure
    raise PlatformFailure(failure)


def _outcome(run: RunState, answer: ToolExecuteAnswer, *, tool: str) -> Any:
    """The final outcome the OE returned, as the value or exception agent code sees."""
    if answer.from_cache:
        logger.info("cached result: tool=%s step=%d", tool, answer.step)
    if answer.status == "error":
        error = answer.error or CallError(category=TOOL_ERROR, explanation="the OE reported an error")
        if error.category == REPLAY_DIVERGED:
            run.platform_failure = run.platform_failure or error.explanation or REPLAY_DIVERGED
            raise PlatformFailure(f"{REPLAY_DIVERGED}: {error.explanation}")
        raise ToolExecutionError(error)
    if answer.status == "suspend":
        signal = SuspendRequested.from_result(answer.result, step=answer.step, tool=tool)
        run.suspension = run.suspension or signal
        raise signal
    return answer.result


@dataclass(frozen=True)
class ToolCallOutcome:
    """A tool call's result and the arguments it ran with (a reviewer's edit, or those asked for)."""

    result: Any
    args: dict[str, Any]


class SecureToolWrapper:
    """One tool as agent code and frameworks call it. `local` is the tool's body when it runs in the AER."""

    def __init__(self, name: str, *, local: ToolSpec | None = None) -> None:
        self.name = name
        self._local = local

    def ainvoke(self, args: Mapping[str, Any] | None = None) -> Call:
        """Start the call now (its step is taken here); await the result."""
        return self._start(args, detailed=False)

    def ainvoke_detailed(self, args: Mapping[str, Any] | None = None) -> Call:
        """As `ainvoke`, but await `ToolCallOutcome`: the result and the arguments the call ran with."""
        return self._start(args, detailed=True)

    def _start(self, args: Mapping[str, Any] | None, *, detailed: bool) -> Call:
        run = _admit(f"calling tool {self.name!r}")
        arguments = _jsonable(dict(args or {}), what=f"the arguments of tool {self.name!r}")
        step = run.allocate_step()
        agent = calling_agent_var.get()
        return self._call(run, step=step, args=arguments, detailed=detailed, agent=agent)

    async def _call(
        self, run: RunState, *, step: int, args: dict[str, Any], detailed: bool, agent: str | None = None
    ) -> Any:
        with step_scope(step):
            request = ToolExecuteRequest(
                execution_id=run.context.execution_id, step=step, tool=self.name, args=args, agent_name=agent
            )
            answer = await _ask(run, request)
            if not answer.proceed:
                raise PolicyDeniedException(answer.reason or f"tool {self.name!r} was denied by policy")
            # A reviewer may have approved the call with edited arguments: those are the ones that ran.
            executed = answer.args if answer.args is not None else args
            if answer.route_to == "callback":
                result = await self._run_local(run, step=step, args=executed)
            else:
                result = _outcome(run, answer, tool=self.name)
            return ToolCallOutcome(result=result, args=executed) if detailed else result

    async def _run_local(self, run: RunState, *, step: int, args: dict[str, Any]) -> Any:
        """Run the approved local body here and report its outcome before the agent sees it (OE-11)."""
        outcome = _LocalOutcome(run, step=step)
        spec = self._local
        if spec is None:
            raise await outcome.fail(
                UNKNOWN_TOOL, f"the OE routed tool {self.name!r} to the AER, which has no local tool so named"
            )
        try:
            kwargs = spec.bind(args)
        except ValidationError as exc:
            problems = "; ".join(f"{p['field']}: {p['problem']}" for p in validation_problems(exc))
            raise await outcome.fail(
                INVALID_ARGUMENTS, f"tool {spec.name!r} arguments are invalid: {problems}"
            ) from None
        try:
            with tool_body_scope(), call_scope(run.context.execution_id, step):
                async with asyncio.timeout(spec.timeout_s) as deadline:
                    # Tracked, so that a drain or an interrupt of this step stops exactly this body.
                    value = await run_tracked(
                        call_tracker_var.get(),
                        execution_id=run.context.execution_id,
                        step=step,
                        cancellable=spec.is_async,
                        start=lambda: spec.acall(kwargs),
                    )
        except SuspendRequested as signal:
            signal.step, signal.tool = step, spec.name
            await outcome.suspend(signal, tool=spec.name)
            raise
        except (CallInterrupted, ExecutionDraining) as exc:
            raise await outcome.fail(exc.category, exc.explanation) from None
        except TimeoutError as exc:
            if not deadline.expired():
                raise await outcome.raised(spec.name, exc) from None
            raise await outcome.fail(
                TIMEOUT, f"tool {spec.name!r} did not finish within its timeout_s={spec.timeout_s:g}"
            ) from None
        except Exception as exc:
            raise await outcome.raised(spec.name, exc) from None
        try:
            result = to_jsonable_python(value)
        except PydanticSerializationError:
            raise await outcome.fail(
                TOOL_ERROR,
                f"tool {spec.name!r} returned a {type(value).__name__}, which is not JSON-serializable",
            ) from None
        await outcome.report("success", result=result)
        # The JSON form, as a replay from the OE's cache returns it: the agent sees the same either way.
        return result


class _LocalOutcome:
    """Reports one local call's outcome (`POST /tool/result`); unacknowledged is a platform failure."""

    def __init__(self, run: RunState, *, step: int) -> None:
        self._run = run
        self._step = step
        self._started = time.perf_counter()

    async def report(self, status: CallStatus, *, result: Any = None, error: CallError | None = None) -> None:
        request = ToolResultRequest(
            execution_id=self._run.context.execution_id,
            step=self._step,
            status=status,
            result=result,
            error=error,
            duration_ms=(time.perf_counter() - self._started) * 1000,
        )
        oe = self._run.oe

        async def exchange() -> None:
            if oe is None:
                raise PlatformFailure("no Orchestration Engine is configured for this run")
            await oe.tool_result(request)

        await _guard(self._run, exchange())

    async def fail(self, category: str, explanation: str) -> ToolExecutionError:
        """Report the failure and return the exception agent code gets."""
        error = CallError(category=category, explanation=explanation)
        await self.report("error", error=error)
        return ToolExecutionError(error)

    async def raised(self, tool: str, exc: BaseException) -> ToolExecutionError:
        told = tool_message(exc)
        if told is not None:
            # The tool meant this text for the model (ToolError, LangChain's ToolException).
            return await self.fail(TOOL_MESSAGE, told)
        # The message may quote anything: only the type reaches the model and the OE, the log keeps the rest.
        logger.error(
            "local tool %s raised %s:\n%s", tool, type(exc).__name__, "".join(traceback.format_exception(exc))
        )
        return await self.fail(TOOL_ERROR, f"tool {tool!r} failed with {type(exc).__name__}; see the AER log")

    async def suspend(self, signal: SuspendRequested, *, tool: str) -> None:
        try:
            result = {"reason": signal.reason, "payload": to_jsonable_python(signal.payload)}
        except PydanticSerializationError:
            raise await self.fail(
                TOOL_ERROR, f"tool {tool!r} suspended with a payload that is not JSON-serializable"
            ) from None
        await self.report("suspend", result=result)
        self._run.suspension = self._run.suspension or signal


class SecureWrappedLLM:
    """A model registered with `app.llm`: each call goes to the OE, which runs it in the Tool Pod (OE-19)."""

    def __init__(self, llm: Any, *, llm_id: str) -> None:
        self.llm_id = llm_id
        self.wrapped = llm

    def ainvoke(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        """Start the model call now (its step is taken here); await the final AI message."""
        return self._call(*self._request(messages, tools=tools, options=options, stream=False))

    async def astream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        """Stream the model call (B-13): the OE publishes the model's tokens as `llm_delta` events of the
        execution while they arrive; the agent gets the final AI message, the replay cache's, as the one
        chunk, so a replayed run sees exactly what the first one did."""
        yield await self._call(*self._request(messages, tools=tools, options=options, stream=True))

    async def astream_deltas(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> tuple[list[LLMDelta], dict[str, Any]]:
        """A streamed call's deltas as the OE published them (redacted, in order; one `from_cache` delta
        for a replayed step) and its final AI message: what a LangGraph `messages` stream is made of."""
        run, request = self._request(messages, tools=tools, options=options, stream=True)
        deltas: list[LLMDelta] = []
        message = await self._call(run, request, deltas=deltas)
        return deltas, message

    def _request(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None,
        options: Mapping[str, Any],
        stream: bool,
    ) -> tuple[RunState, ToolExecuteRequest]:
        run = _admit(f"calling the model {self.llm_id!r}")
        request_messages = _jsonable([dict(m) for m in messages], what="messages")
        request_tools = None if tools is None else _jsonable([dict(t) for t in tools], what="tools")
        request_options = _jsonable(options, what="model options") if options else None
        step = run.allocate_step()
        request = ToolExecuteRequest(
            execution_id=run.context.execution_id,
            step=step,
            tool=INVOKE_LLM,
            llm_id=self.llm_id,
            messages=request_messages,
            tools=request_tools,
            options=request_options,
            stream=True if stream else None,
            agent_name=calling_agent_var.get(),
        )
        return run, request

    async def _call(
        self, run: RunState, request: ToolExecuteRequest, *, deltas: list[LLMDelta] | None = None
    ) -> dict[str, Any]:
        with step_scope(request.step):
            answer = await _ask(run, request)
            if deltas is not None and answer.deltas:
                deltas.extend(answer.deltas)
            if not answer.proceed:
                raise PolicyDeniedException(answer.reason or f"model {self.llm_id!r} was denied by policy")
            if answer.route_to == "callback":
                failure = "the OE routed an LLM call back to the AER; model calls run in the Tool Pod only"
                run.platform_failure = run.platform_failure or failure
                raise PlatformFailure(failure)
            message = _outcome(run, answer, tool=INVOKE_LLM)
            if not isinstance(message, dict) or message.get("type") != "ai":
                failure = f"the OE's answer to the model call at step {request.step} is not an AI message"
                run.platform_failure = run.platform_failure or failure
                raise PlatformFailure(failure)
            return message


def call_tool(
    name: str, args: Mapping[str, Any] | None = None, *, local_tools: Mapping[str, ToolSpec] | None = None
) -> Call:
    """Call any tool (local, remote tenant or connector) through the OE; local tools default to the run's."""
    return _wrapper(name, local_tools).ainvoke(args)


def call_tool_detailed(
    name: str, args: Mapping[str, Any] | None = None, *, local_tools: Mapping[str, ToolSpec] | None = None
) -> Call:
    """As `call_tool`; await a `ToolCallOutcome` (the result and the arguments the call ran with)."""
    return _wrapper(name, local_tools).ainvoke_detailed(args)


def _wrapper(name: str, local_tools: Mapping[str, ToolSpec] | None) -> SecureToolWrapper:
    tools = local_tools if local_tools is not None else current_run().local_tools
    spec = tools.get(name)
    return SecureToolWrapper(name, local=spec if spec is not None and spec.is_local else None)
