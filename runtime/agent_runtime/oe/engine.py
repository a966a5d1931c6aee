"""The Orchestration Engine's logic: every execution, every call, every human decision. No HTTP here.

The HTTP handlers in `servers/oe.py` authenticate the caller and turn these methods' exceptions into
status codes; everything else (ownership, policy, replay, routing, audit, events) happens in this class,
which unit tests call directly.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from agent_runtime.oe.audit import audit_value, redact_value
from agent_runtime.oe.events import EventBus
from agent_runtime.oe.lifecycle import ENTER_FROM
from agent_runtime.oe.policy import Outcome, decide
from agent_runtime.oe.registration import AgentRegistration, ToolEntry, tool_entries
from agent_runtime.oe.replay import Replay, decide_replay, fingerprint
from agent_runtime.oe.runtimes import Runtimes, RuntimeUnavailable
from agent_runtime.oe.store.base import AuditRecord, ExecutionRecord, StepRecord, Store
from agent_runtime.protocol import (
    AER_LOST,
    REJECTED_BY_REVIEWER,
    REPLAY_DIVERGED,
    AERExecuteRequest,
    CallError,
    CallOutcome,
    ExecutionState,
    ExecutorCallback,
    InvokeLLMRequest,
    InvokeRequest,
    ReviewDecision,
    ToolExecuteAnswer,
    ToolExecuteRequest,
    ToolResultRequest,
    state_of_callback,
)

logger = logging.getLogger(__name__)

S = ExecutionState
APPROVAL_REQUIRED = "approval_required"
_DISCOVERY_RETRY_S = 5.0


class NotFound(Exception):
    """No such execution (or not the caller's): 404, with nothing that hints whether it exists."""


class Conflict(Exception):
    """The request contradicts the execution's state: 409 with a code and a sentence."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class UnknownAgent(Exception):
    """No registration for the Agent named."""


class Registrations(Protocol):
    """What the engine needs of the registry: an Agent's registration by name."""

    def get(self, agent: str) -> AgentRegistration | None: ...


class Orchestrator:
    def __init__(
        self,
        *,
        store: Store,
        registry: Registrations,
        runtimes: Runtimes,
        events: EventBus | None = None,
        instance_id: str | None = None,
        clock: Callable[[], float] = time.time,
        aer_lost_after_s: float = 30.0,
    ) -> None:
        self.store = store
        self.registry = registry
        self.runtimes = runtimes
        self.events = events or EventBus(store=store)
        self.instance_id = instance_id or uuid.uuid4().hex
        self._clock = clock
        self._aer_lost_after_s = aer_lost_after_s
        self._inflight: dict[tuple[str, int], asyncio.Future[ToolExecuteAnswer]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Agent -> (token digest, when, tools) learned from its AER (see `_tool_entry`).
        self._discovered: dict[str, tuple[str, float, tuple[ToolEntry, ...]]] = {}

    # client API ---------------------------------------------------------------------------------------

    async def invoke(self, request: InvokeRequest) -> ExecutionRecord:
        """Create the execution (pending) and start it on the Agent's AER in the background."""
        reg = self.registry.get(request.agent)
        if reg is None:
            raise UnknownAgent(
                f"no Agent {request.agent!r} is registered with this Orchestration Engine; check the name "
                "(<namespace>/<name>) and that the Agent is Ready"
            )
        now = self._clock()
        record = ExecutionRecord(
            execution_id=uuid.uuid4().hex,
            agent=reg.agent,
            project_id=reg.project_id,
            workspace_id=reg.workspace_id,
            session_id=request.session_id or uuid.uuid4().hex,
            user_id=request.user_id,
            org_id=request.org_id,
            input=request.input,
            created_at=now,
            updated_at=now,
        )
        await self.store.create_execution(record)
        await self.events.publish(record.execution_id, type="created", data={"agent": reg.agent})
        self._spawn(self._start(record, reg, resume=False))
        return record

    async def get(self, execution_id: str, *, project_id: str | None = None) -> ExecutionRecord:
        record = await self.store.get_execution(execution_id)
        if record is None or (project_id is not None and record.project_id != project_id):
            raise NotFound(execution_id)
        return record

    async def cancel(self, execution_id: str) -> ExecutionRecord:
        """Make the cancel durable; the run's next call or callback is refused."""
        await self.get(execution_id)
        now = self._clock()
        updated = await self.store.transition(
            execution_id,
            from_states=ENTER_FROM[S.CANCELLED],
            changes={"status": S.CANCELLED, "cancel_requested": True, "updated_at": now, "finished_at": now},
        )
        if updated is None:
            current = await self.get(execution_id)
            raise Conflict("execution_final", f"the execution is already {current.status.value}")
        await self._audit(updated, kind="cancel", decision="cancelled", status="accepted")
        await self.events.publish(execution_id, type="cancelled")
        return updated

    async def resume(
        self, execution_id: str, review: ReviewDecision, *, project_id: str | None = None
    ) -> ExecutionRecord:
        """Store the human decision at the suspended step, then re-run the agent from the start."""
        record = await self.get(execution_id, project_id=project_id)
        if record.status is not S.SUSPENDED:
            raise Conflict("not_suspended", f"the execution is {record.status.value}, not suspended")
        reg = self.registry.get(record.agent)
        if reg is None:
            raise Conflict("agent_not_registered", f"Agent {record.agent!r} is no longer registered")
        suspension = record.suspension or {}
        now = self._clock()
        # One resume wins: the state moves before anything is executed.
        updated = await self.store.transition(
            execution_id,
            from_states=frozenset({S.SUSPENDED}),
            changes={"status": S.RUNNING, "suspension": None, "updated_at": now},
        )
        if updated is None:
            raise Conflict("not_suspended", "the execution was resumed or cancelled meanwhile")
        executed_args = await self._settle_suspended_step(updated, reg, suspension, review)
        await self._audit(
            updated,
            kind="resume",
            step=suspension.get("step"),
            tool=suspension.get("tool"),
            decision=review.decision,
            reason=review.reviewer_notes,
            args={"requested": suspension.get("args"), "executed": executed_args},
            secrets=self._secrets(reg),
            status="accepted",
        )
        await self.events.publish(execution_id, type="resumed", data={"decision": review.decision})
        self._spawn(self._start(updated, reg, resume=True))
        return updated

    async def _settle_suspended_step(
        self,
        record: ExecutionRecord,
        reg: AgentRegistration,
        suspension: dict[str, Any],
        review: ReviewDecision,
    ) -> dict[str, Any] | None:
        """Give the suspended step its final outcome; returns the arguments an approved call ran with."""
        step_no = suspension.get("step")
        if not isinstance(step_no, int):
            return None  # suspended by the agent's own logic, outside any call: nothing to answer
        step = await self.store.get_step(record.execution_id, step_no)
        if step is None or step.outcome is None or step.outcome.status != "suspend":
            return None
        held = step.outcome.result if isinstance(step.outcome.result, dict) else {}
        now = self._clock()
        if held.get("kind") != APPROVAL_REQUIRED:
            outcome = CallOutcome(
                status="success",
                result={"decision": review.decision, "reviewer_notes": review.reviewer_notes},
            )
            await self.store.finish_step(record.execution_id, step_no, outcome, at=now)
            return None
        if review.decision == "rejected":
            note = review.reviewer_notes or "no notes"
            outcome = CallOutcome(
                status="error",
                error=CallError(category=REJECTED_BY_REVIEWER, explanation=f"rejected by reviewer: {note}"),
            )
            await self.store.finish_step(record.execution_id, step_no, outcome, at=now)
            return None
        args = review.args if review.args is not None else dict(held.get("args") or {})
        entry = await self._tool_entry(reg, step.tool)
        if entry is not None and entry.location == "local":
            # An approved local tool runs in the AER's own call stack when the replay reaches it; its
            # `/tool/result` then replaces the held outcome.
            approved = sorted({*record.approved_steps, step_no})
            await self.store.update_execution(record.execution_id, {"approved_steps": approved})
            return args
        if held.get("llm"):
            outcome = await self.runtimes.invoke_llm(reg, InvokeLLMRequest.model_validate(held["llm"]))
        else:
            outcome = await self.runtimes.execute_tool(
                reg, tool=step.tool, arguments=args, execution_id=record.execution_id, step=step_no
            )
        await self.store.finish_step(record.execution_id, step_no, outcome, at=self._clock())
        return args

    # runtime API --------------------------------------------------------------------------------------

    async def tool_execute(self, caller: AgentRegistration, call: ToolExecuteRequest) -> ToolExecuteAnswer:
        """Audit, police, replay and route one intercepted call; a retry of the same step joins the first."""
        record = await self._owned(caller, call.execution_id)
        key = (call.execution_id, call.step)
        first = self._inflight.get(key)
        if first is not None:
            answer = await asyncio.shield(first)
            await self._audit_call(record, call, caller, decision="joined", answer=answer)
            return answer
        future: asyncio.Future[ToolExecuteAnswer] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            answer = await self._tool_execute(record, caller, call)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: joined callers re-raise it, nobody else must
            raise
        else:
            future.set_result(answer)
            return answer
        finally:
            del self._inflight[key]

    async def _tool_execute(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest
    ) -> ToolExecuteAnswer:
        if record.status is not S.RUNNING:
            await self._audit_call(record, call, caller, decision="refused", reason=record.status.value)
            raise Conflict("execution_not_running", f"the execution is {record.status.value}")
        fp = fingerprint(call)
        now = self._clock()
        existing = await self.store.claim_step(
            StepRecord(
                execution_id=call.execution_id,
                step=call.step,
                tool=call.tool,
                fingerprint=fp,
                owner=self.instance_id,
                created_at=now,
                updated_at=now,
            )
        )
        replay = decide_replay(fp, existing)
        entry = None if call.is_llm else await self._tool_entry(caller, call.tool)
        if replay.kind is Replay.DIVERGED:
            return await self._diverged(record, caller, call, recorded=replay.record)
        if replay.kind is Replay.CACHED:
            assert replay.record is not None and replay.record.outcome is not None
            if call.step in record.approved_steps and replay.record.outcome.status == "suspend":
                return await self._route_local(record, caller, call)
            answer = _answer(call.step, replay.record.outcome, from_cache=True)
            await self._audit_call(record, call, caller, decision="cached", route="cache", answer=answer)
            await self.events.publish(
                call.execution_id, type="step_finished", step=call.step, data=_step_data(call, answer)
            )
            return answer
        if replay.kind is Replay.IN_PROGRESS:
            # Stale claim: its OE died mid-call, or an approved local tool waits for the AER to run it.
            await self.store.reset_step(call.execution_id, call.step, owner=self.instance_id, at=now)
        await self.store.note_step(call.execution_id, call.step, at=now)
        if entry is None and not call.is_llm:
            return await self._deny(
                record, caller, call, f"unknown tool {call.tool!r}: the Agent has no such tool"
            )
        verdict = decide(caller.policy, tool=call.tool, sensitive=bool(entry and entry.sensitive))
        if verdict.outcome is Outcome.DENY:
            return await self._deny(record, caller, call, verdict.reason)
        if verdict.outcome is Outcome.APPROVAL:
            held: dict[str, Any] = {
                "kind": APPROVAL_REQUIRED,
                "tool": call.tool,
                "args": call.args,
                "step": call.step,
                "reason": verdict.reason,
            }
            if call.is_llm:
                held["llm"] = self._llm_request(call).model_dump(mode="json")
            return await self._finish(
                record, caller, call, CallOutcome(status="suspend", result=held), decision="approval"
            )
        if entry is not None and entry.location == "local":
            return await self._route_local(record, caller, call)
        await self.events.publish(
            call.execution_id,
            type="step_started",
            step=call.step,
            data={"tool": call.tool, "route": "tool_pod"},
        )
        if call.is_llm:
            outcome = await self.runtimes.invoke_llm(caller, self._llm_request(call))
        else:
            outcome = await self.runtimes.execute_tool(
                caller, tool=call.tool, arguments=call.args, execution_id=call.execution_id, step=call.step
            )
        if outcome.status == "suspend":
            outcome = outcome.model_copy(update={"result": _suspend_payload(call, outcome.result)})
        return await self._finish(record, caller, call, outcome, decision="allow", route="tool_pod")

    async def tool_result(self, caller: AgentRegistration, report: ToolResultRequest) -> None:
        """Store a local tool's outcome as its step's final one; the same report twice is a no-op."""
        record = await self._owned(caller, report.execution_id)
        step = await self.store.get_step(report.execution_id, report.step)
        if step is None:
            raise NotFound(f"{report.execution_id}/{report.step}")
        result = report.result
        if report.status == "suspend":
            result = {**(result if isinstance(result, dict) else {}), "kind": "suspend"}
            result.update(step=report.step, tool=step.tool)
        outcome = CallOutcome(
            status=report.status, result=result, error=report.error, duration_ms=report.duration_ms or 0.0
        )
        approved_now = (
            report.step in record.approved_steps
            and step.outcome is not None
            and step.outcome.status == "suspend"
        )
        if step.state == "done" and not approved_now:
            if step.outcome is not None and _same_outcome(step.outcome, outcome):
                return
            await self._audit(
                record, kind="tool", step=report.step, tool=step.tool, decision="conflict", status="refused"
            )
            raise Conflict("step_final", f"step {report.step} already has a final outcome")
        entry = await self._tool_entry(caller, step.tool)
        if entry is None or entry.location != "local":
            raise Conflict(
                "not_a_callback_step", f"step {report.step} ({step.tool}) was not routed to the AER"
            )
        await self.store.finish_step(report.execution_id, report.step, outcome, at=self._clock())
        if outcome.status == "suspend":
            await self._hold(report.execution_id, outcome.result)
        answer = _answer(report.step, outcome, from_cache=False)
        await self._audit(
            record,
            kind="tool",
            step=report.step,
            tool=step.tool,
            decision="callback_result",
            route="callback",
            status=outcome.status,
            error_category=outcome.error.category if outcome.error else None,
            duration_ms=outcome.duration_ms,
            args=None,
        )
        await self.events.publish(
            report.execution_id,
            type="step_finished",
            step=report.step,
            data={"tool": step.tool, "status": answer.status, "from_cache": False},
        )

    async def callback(self, caller: AgentRegistration, report: ExecutorCallback) -> ExecutionRecord:
        """The end of one run: completed, suspended or failed. Idempotent; a conflicting one is a 409."""
        current = await self._owned(caller, report.execution_id)
        target = state_of_callback(report.status)
        now = self._clock()
        changes: dict[str, Any] = {"status": target, "updated_at": now}
        if target is S.COMPLETED:
            changes.update(result=report.result, finished_at=now)
        elif target is S.FAILED:
            changes.update(error=report.error or CallError(category="failed"), finished_at=now)
        else:
            # What the OE held at the suspending step is authoritative; the AER's metadata rides along.
            held = (
                current.suspension
                if current.status is S.RUNNING and current.suspension
                else {"kind": "suspend"}
            )
            changes["suspension"] = {**held, "metadata": report.metadata or {}}
        updated = await self.store.transition(
            report.execution_id, from_states=frozenset({S.RUNNING}), changes=changes
        )
        if updated is None:
            current = await self.get(report.execution_id)
            if current.status is target and _same_callback(current, report):
                return current
            await self._audit(
                current, kind="callback", decision="conflict", status="refused", reason=report.status.value
            )
            raise Conflict(
                "execution_final"
                if current.status.value in ("completed", "failed", "cancelled")
                else "not_running",
                f"the execution is {current.status.value}; a {report.status.value} callback cannot change it",
            )
        await self._audit(
            updated,
            kind="callback",
            decision=report.status.value.lower(),
            status="accepted",
            error_category=report.error.category if report.error else None,
        )
        data: dict[str, Any] = {}
        if report.error is not None:
            data["error"] = report.error.model_dump()
        await self.events.publish(report.execution_id, type=target.value, data=data)
        return updated

    # background work ----------------------------------------------------------------------------------

    async def recover(self) -> None:
        """After a start: runs that were created but never handed to an AER are started now."""
        cursor: str | None = None
        while True:
            page = await self.store.list_executions(status=S.PENDING, limit=200, cursor=cursor)
            for record in page.items:
                reg = self.registry.get(record.agent)
                if reg is not None:
                    self._spawn(self._start(record, reg, resume=False))
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def watchdog_once(self) -> int:
        """Fail running executions whose AER no longer runs them; returns how many were failed."""
        failed = 0
        cursor: str | None = None
        now = self._clock()
        while True:
            page = await self.store.list_executions(status=S.RUNNING, limit=200, cursor=cursor)
            for record in page.items:
                if now - record.updated_at < self._aer_lost_after_s:
                    continue
                reg = self.registry.get(record.agent)
                alive = None if reg is None else await self.runtimes.execution_alive(reg, record.execution_id)
                if alive:
                    await self.store.update_execution(record.execution_id, {"updated_at": now})
                    continue
                why = "the AER no longer runs it" if alive is False else "the AER could not be reached"
                if await self._fail(record, CallError(category=AER_LOST, explanation=why)):
                    failed += 1
            if page.next_cursor is None:
                return failed
            cursor = page.next_cursor

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _start(self, record: ExecutionRecord, reg: AgentRegistration, *, resume: bool) -> None:
        if not resume:
            started = await self.store.transition(
                record.execution_id,
                from_states=frozenset({S.PENDING}),
                changes={"status": S.RUNNING, "runs": record.runs + 1, "updated_at": self._clock()},
            )
            if started is None:
                return  # cancelled before it started, or another replica started it
            await self.events.publish(record.execution_id, type="running")
        else:
            await self.store.update_execution(record.execution_id, {"runs": record.runs + 1})
        request = AERExecuteRequest(
            execution_id=record.execution_id,
            workspace_id=record.workspace_id,
            session_id=record.session_id,
            user_id=record.user_id,
            org_id=record.org_id,
            input=record.input,
            resume=resume,
        )
        try:
            await self.runtimes.start_run(reg, request)
        except RuntimeUnavailable as exc:
            await self._fail(record, CallError(category=AER_LOST, explanation=str(exc)))

    async def _hold(self, execution_id: str, payload: Any) -> None:
        """Remember which step suspended the run and what it asks, for the callback and the resume."""
        await self.store.update_execution(
            execution_id, {"suspension": payload if isinstance(payload, dict) else {"reason": str(payload)}}
        )

    async def _fail(self, record: ExecutionRecord, error: CallError) -> bool:
        now = self._clock()
        updated = await self.store.transition(
            record.execution_id,
            from_states=frozenset({S.PENDING, S.RUNNING}),
            changes={"status": S.FAILED, "error": error, "updated_at": now, "finished_at": now},
        )
        if updated is None:
            return False
        logger.warning("execution %s failed: %s", record.execution_id, error.category)
        await self.events.publish(record.execution_id, type="failed", data={"error": error.model_dump()})
        return True

    # helpers ------------------------------------------------------------------------------------------

    async def _tool_entry(self, reg: AgentRegistration, name: str) -> ToolEntry | None:
        """The tool as the registration lists it; a registration without tools defers to the AER's list.

        The operator cannot see the tenant's own tools (they are in the image's code), so it publishes
        none and the OE asks the AER's `GET /tools` (which says `is_local` and `sensitive`), once per
        token, again when a name is missing and the last look is older than a few seconds.
        """
        if reg.tools:
            return reg.tool(name)
        digest = reg.token_digest()
        cached = self._discovered.get(reg.agent)
        now = self._clock()
        stale = (
            cached is None
            or cached[0] != digest
            or (all(entry.name != name for entry in cached[2]) and now - cached[1] > _DISCOVERY_RETRY_S)
        )
        if stale:
            surface = await self.runtimes.list_tools(reg)
            if surface is not None:
                cached = (digest, now, tool_entries(surface))
                self._discovered[reg.agent] = cached
        if cached is None:
            return None
        return next((entry for entry in cached[2] if entry.name == name), None)

    async def _owned(self, caller: AgentRegistration, execution_id: str) -> ExecutionRecord:
        """The execution, if it belongs to the calling Agent; otherwise 404 exactly as if it did not exist."""
        record = await self.store.get_execution(execution_id)
        if record is None or record.agent != caller.agent:
            raise NotFound(execution_id)
        return record

    @staticmethod
    def _llm_request(call: ToolExecuteRequest) -> InvokeLLMRequest:
        return InvokeLLMRequest(
            llm_id=call.llm_id or "default",
            messages=call.messages or [],
            tools=call.tools,
            options=call.options,
            execution_id=call.execution_id,
            step=call.step,
        )

    async def _route_local(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest
    ) -> ToolExecuteAnswer:
        """An allowed local tool goes back to the AER's call stack; its `/tool/result` finishes the step."""
        answer = ToolExecuteAnswer(step=call.step, proceed=True, route_to="callback")
        await self._audit_call(record, call, caller, decision="allow", route="callback", answer=answer)
        await self.events.publish(
            call.execution_id,
            type="step_started",
            step=call.step,
            data={"tool": call.tool, "route": "callback"},
        )
        return answer

    async def _deny(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest, reason: str
    ) -> ToolExecuteAnswer:
        # Not cached: a replay asks the policy again, which may have changed while the run was suspended.
        await self.store.delete_step(call.execution_id, call.step)
        answer = ToolExecuteAnswer(step=call.step, proceed=False, reason=reason)
        await self._audit_call(
            record, call, caller, decision="deny", reason=reason, route="none", answer=answer
        )
        await self.events.publish(
            call.execution_id,
            type="step_finished",
            step=call.step,
            data={"tool": call.tool, "status": "denied"},
        )
        return answer

    async def _diverged(
        self,
        record: ExecutionRecord,
        caller: AgentRegistration,
        call: ToolExecuteRequest,
        *,
        recorded: StepRecord | None,
    ) -> ToolExecuteAnswer:
        was = recorded.tool if recorded is not None else "?"
        message = (
            f"step {call.step} replayed as {call.tool!r} with other arguments than the recorded {was!r} "
            "call; an agent must make the same calls in the same order when it is resumed"
        )
        await self._audit_call(record, call, caller, decision="diverged", reason=message, route="none")
        await self._fail(record, CallError(category=REPLAY_DIVERGED, explanation=message))
        raise Conflict(REPLAY_DIVERGED, message)

    async def _finish(
        self,
        record: ExecutionRecord,
        caller: AgentRegistration,
        call: ToolExecuteRequest,
        outcome: CallOutcome,
        *,
        decision: str,
        route: str = "none",
    ) -> ToolExecuteAnswer:
        await self.store.finish_step(call.execution_id, call.step, outcome, at=self._clock())
        if outcome.status == "suspend":
            await self._hold(call.execution_id, outcome.result)
        answer = _answer(call.step, outcome, from_cache=False)
        await self._audit_call(record, call, caller, decision=decision, route=route, answer=answer)
        await self.events.publish(
            call.execution_id, type="step_finished", step=call.step, data=_step_data(call, answer)
        )
        return answer

    async def _audit_call(
        self,
        record: ExecutionRecord,
        call: ToolExecuteRequest,
        caller: AgentRegistration,
        *,
        decision: str,
        reason: str | None = None,
        route: str | None = None,
        answer: ToolExecuteAnswer | None = None,
    ) -> None:
        asked: Any = call.messages if call.is_llm else call.args
        await self._audit(
            record,
            kind="llm" if call.is_llm else "tool",
            step=call.step,
            tool=call.tool,
            llm_id=call.llm_id,
            args=asked,
            secrets=self._secrets(caller),
            decision=decision,
            reason=reason,
            route=route,
            from_cache=bool(answer and answer.from_cache),
            status=answer.status if answer else None,
            error_category=answer.error.category if answer and answer.error else None,
            duration_ms=answer.duration_ms if answer else None,
            pod_name=answer.pod_name if answer else None,
        )

    async def _audit(
        self,
        record: ExecutionRecord,
        *,
        kind: str,
        decision: str,
        secrets: tuple[str, ...] = (),
        args: Any = None,
        **fields: Any,
    ) -> None:
        await self.store.append_audit(
            AuditRecord(
                execution_id=record.execution_id,
                agent=record.agent,
                workspace_id=record.workspace_id,
                kind=kind,  # type: ignore[arg-type]
                decision=decision,
                args=audit_value(args, secrets=secrets) if args is not None else None,
                at=self._clock(),
                **fields,
            )
        )

    @staticmethod
    def _secrets(reg: AgentRegistration) -> tuple[str, ...]:
        return (reg.token.get_secret_value(),)


def _answer(step: int, outcome: CallOutcome, *, from_cache: bool) -> ToolExecuteAnswer:
    return ToolExecuteAnswer(
        step=step,
        proceed=True,
        status=outcome.status,
        result=outcome.result,
        error=outcome.error,
        from_cache=from_cache,
        duration_ms=outcome.duration_ms,
        pod_name=outcome.pod_name,
    )


def _suspend_payload(call: ToolExecuteRequest, result: Any) -> dict[str, Any]:
    """A tool's suspension, marked with its step so a resume can answer exactly that step."""
    payload = dict(result) if isinstance(result, dict) else {"reason": str(result)}
    payload.setdefault("kind", "suspend")
    payload.update(step=call.step, tool=call.tool)
    return payload


def _step_data(call: ToolExecuteRequest, answer: ToolExecuteAnswer) -> dict[str, Any]:
    data: dict[str, Any] = {"tool": call.tool, "status": answer.status, "from_cache": answer.from_cache}
    if answer.error is not None:
        data["error_category"] = answer.error.category
    return data


def _same_outcome(a: CallOutcome, b: CallOutcome) -> bool:
    return a.status == b.status and a.result == b.result and a.error == b.error


def _same_callback(record: ExecutionRecord, report: ExecutorCallback) -> bool:
    if report.status.value == "COMPLETED":
        return record.result == report.result
    if report.status.value == "FAILED":
        return record.error is not None and report.error is not None and record.error == report.error
    return (record.suspension or {}).get("metadata") == (report.metadata or {})


def client_view(record: ExecutionRecord, *, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """The execution as clients see it (OE-02): lower-case status, ISO times, no secret values."""

    def iso(ts: float | None) -> str | None:
        if ts is None:
            return None
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}Z"

    view: dict[str, Any] = {
        "execution_id": record.execution_id,
        "agent": record.agent,
        "project_id": record.project_id,
        "session_id": record.session_id,
        "status": record.status.value,
        "step_count": record.step_count,
        "runs": record.runs,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
        "finished_at": iso(record.finished_at),
    }
    if record.user_id is not None:
        view["user_id"] = record.user_id
    if record.status is S.COMPLETED:
        view["result"] = record.result
    if record.error is not None:
        view["error"] = record.error.model_dump(exclude_none=True)
    if record.suspension is not None:
        view["suspension"] = redact_value(record.suspension, secrets=secrets)
    return view
