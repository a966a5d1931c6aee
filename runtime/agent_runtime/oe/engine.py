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
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Literal, Protocol

from agent_runtime.execution_token import EXPORT_TTL_S, expires_at
from agent_runtime.oe import spans
from agent_runtime.oe.audit import audit_value, redact_value
from agent_runtime.oe.audit_ledger import AuditLedger, JsonlExport, Signer
from agent_runtime.oe.conditions import facts as condition_facts
from agent_runtime.oe.deadlines import SYSTEM_DECIDER, expired, stamp
from agent_runtime.oe.drains import DrainCaller, DrainCallerSettings
from agent_runtime.oe.events import EventBus
from agent_runtime.oe.graph_stream import chunk_event_data, chunk_refusal
from agent_runtime.oe.holds import INTERRUPT, agent_hold_kind, decided_answer, value_problem
from agent_runtime.oe.leases import leases_for, watchdog_key
from agent_runtime.oe.lifecycle import ENTER_FROM
from agent_runtime.oe.limiter import Limiter, refusal_detail
from agent_runtime.oe.limits import Limits, Refusal
from agent_runtime.oe.llm_streams import (
    LLM_DELTA,
    delta_data,
    publish_cached,
    streamed_llm_call,
    wants_stream,
)
from agent_runtime.oe.notify import Notifier, NotifySettings, ReviewEvent
from agent_runtime.oe.observer import NullObserver, ObservedStore, Observer
from agent_runtime.oe.policy import Outcome, decide
from agent_runtime.oe.registration import AgentRegistration, ToolEntry, tool_entries
from agent_runtime.oe.replay import Replay, decide_replay, fingerprint
from agent_runtime.oe.runtimes import Runtimes, RuntimeUnavailable
from agent_runtime.oe.step_content import step_content
from agent_runtime.oe.store.base import (
    AuditRecord,
    ExecutionRecord,
    Identity,
    Review,
    StepDecider,
    StepRecord,
    Store,
)
from agent_runtime.oe.store.deliveries import DeliveryRecord
from agent_runtime.oe.stream_settings import StreamSettings
from agent_runtime.oe.usage import PriceTable, cost, model_usage
from agent_runtime.protocol import (
    AER_LOST,
    AGENT_SUSPEND,
    INVOKE_LLM,
    OUTCOME_UNKNOWN,
    REJECTED_BY_REVIEWER,
    REPLAY_DIVERGED,
    AERExecuteRequest,
    CallError,
    CallOutcome,
    ExecutionState,
    ExecutorCallback,
    GraphStreamChunk,
    InvokeLLMRequest,
    InvokeRequest,
    ReviewDecision,
    SuspendReply,
    ToolExecuteAnswer,
    ToolExecuteRequest,
    ToolResultRequest,
    state_of_callback,
)
from agent_runtime.redaction import Redactor, redacted_error, redactor_for

logger = logging.getLogger(__name__)

S = ExecutionState
APPROVAL_REQUIRED = "approval_required"
_DISCOVERY_RETRY_S = 5.0
# How long a cancel waits for a resume that claimed the decision first to write its state change.
_RESUME_LANDS_S = 5.0


class NotFound(Exception):
    """No such execution (or not the caller's): 404, with nothing that hints whether it exists."""


class Conflict(Exception):
    """The request contradicts the execution's state: 409 with a code and a sentence."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class UnknownAgent(Exception):
    """No registration for the Agent named."""


class BadReview(Exception):
    """A resume body that is well formed but does not fit the suspension: 400 naming the field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


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
        run_restarts: int = 3,
        drain_settings: DrainCallerSettings | None = None,
        known_secrets: Callable[[], Iterable[str]] = tuple,
        prices: PriceTable | None = None,
        streaming: StreamSettings | None = None,
        default_limits: Limits | None = None,
        audit_signer: Callable[[], Signer | None] = lambda: None,
        audit_public_keys: Callable[[], tuple[str, ...]] = tuple,
        audit_export: JsonlExport | None = None,
        notify_settings: NotifySettings | None = None,
    ) -> None:
        # Every audit append, here and in the drains, is followed by the chain's signed head (issue 34).
        self.ledger = AuditLedger(
            store, signer=audit_signer, public_keys=audit_public_keys, export=audit_export
        )
        store = self.ledger.wrap(store)
        self.store = store
        self.registry = registry
        self.runtimes = runtimes
        self.events = events or EventBus(store=store)
        # Model deltas, step results in events, each event-stream client's buffer (issue 32).
        self.streaming = streaming or StreamSettings()
        self.events.subscribers.limit = self.streaming.subscriber_buffer
        self.instance_id = instance_id or uuid.uuid4().hex
        # Several replicas share the watchdog and drain work: one looks after each execution at a time,
        # another takes over once the lease runs out (oe/leases.py).
        self.leases = leases_for(store, holder=self.instance_id, term_s=max(2 * aer_lost_after_s, 5.0))
        self._clock = clock
        self._aer_lost_after_s = aer_lost_after_s
        self._run_restarts = run_restarts
        # Execution -> when the watchdog first could not reach its AER (a restart gets that long).
        self._unreachable: dict[str, float] = {}
        self._inflight: dict[tuple[str, int], asyncio.Future[ToolExecuteAnswer]] = {}
        # Secrets the OE holds beyond the Agents' tokens (its client token): never stored or forwarded.
        self._known_secrets = known_secrets
        # Model -> price per million tokens: a model step's cost in its audit record (agent_runtime.oe.usage).
        self.prices = prices or PriceTable()
        self.observer: Observer = NullObserver()
        # Issue 34: spec.limits over the store's counters, the audit's signed chain heads, review notices.
        self.limiter = Limiter(store, clock=clock, defaults=default_limits)
        self.notifier = Notifier(settings=notify_settings, clock=clock)
        self._tasks: set[asyncio.Task[None]] = set()
        # Agent -> (token digest, when, tools) learned from its AER (see `_tool_entry`).
        self._discovered: dict[str, tuple[str, float, tuple[ToolEntry, ...]]] = {}
        # Drains of cancelled executions and interrupts of calls, delivered by `drains.run` (OE-17, OE-18).
        self.drains = DrainCaller(
            leases=self.leases,
            store=store,
            registry=registry,
            events=self.events,
            settings=drain_settings,
            clock=clock,
            busy=self._calls_in_flight,
        )

    def observe(self, observer: Observer) -> None:
        """Show `observer` (the metrics) every audit record, failure and human decision from now on."""
        self.observer = observer
        self.store = ObservedStore(self.store, observer)  # type: ignore[assignment]
        self.drains.store = self.store

    # client API ---------------------------------------------------------------------------------------

    def memory_export_statement(
        self, agent: str, *, user_id: str, org_id: str | None
    ) -> tuple[str, float] | None:
        """A read-only memory statement (`purpose: export`) for one user of `agent`, and its expiry; None
        when this OE signs nothing (no key: its runtimes check no statement either). The caller's right to
        it is the client route's to check."""
        reg = self.registry.get(agent)
        if reg is None:
            raise UnknownAgent(
                f"no Agent {agent!r} is registered with this Orchestration Engine; check the project and "
                "the name, and that the Agent is Ready"
            )
        statements = reg.statements(
            "memory", user_id=user_id, org_id=org_id, ttl_s=EXPORT_TTL_S, purpose="export"
        )
        if not statements:
            return None
        return statements[0], expires_at(statements[0])

    async def invoke(self, request: InvokeRequest, *, invoked_by: Identity | None = None) -> ExecutionRecord:
        """Create the execution (pending) and start it on the Agent's AER in the background."""
        reg = self.registry.get(request.agent)
        if reg is None:
            raise UnknownAgent(
                f"no Agent {request.agent!r} is registered with this Orchestration Engine; check the name "
                "(<namespace>/<name>) and that the Agent is Ready"
            )
        await self.limiter.admit(reg, user_id=request.user_id)  # LimitReached: a 429 with Retry-After
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
            invoked_by=invoked_by,
            stream=request.stream,
            stream_mode=request.stream_modes(),
            step_results=request.step_results,
        )
        record.trace_context = spans.execution_started(execution_id=record.execution_id, agent=reg.agent)
        await self.store.create_execution(record)
        await self.events.publish(record.execution_id, type="created", data={"agent": reg.agent})
        self._spawn(self._start(record, reg, resume=False))
        return record

    async def get(self, execution_id: str, *, project_id: str | None = None) -> ExecutionRecord:
        record = await self.store.get_execution(execution_id)
        if record is None or (project_id is not None and record.project_id != project_id):
            # The same words whether it does not exist or belongs to another project.
            where = f" in project {project_id!r}" if project_id is not None else ""
            raise NotFound(f"no execution {execution_id!r}{where}")
        return record

    async def cancel(self, execution_id: str, *, decided_by: Identity | None = None) -> ExecutionRecord:
        """Make the cancel durable; the run's next call or callback is refused."""
        record = await self.get(execution_id)
        if record.status is S.SUSPENDED:
            await self._claim_cancel(record)
        now = self._clock()
        updated = await self.store.transition(
            execution_id,
            from_states=ENTER_FROM[S.CANCELLED],
            changes={
                "status": S.CANCELLED,
                "cancel_requested": True,
                "updated_at": now,
                "finished_at": now,
                "cancelled_by": decided_by,
            },
        )
        if updated is None:
            current = await self.get(execution_id)
            raise Conflict("execution_final", f"the execution is already {current.status.value}")
        await self._audit(
            updated, kind="cancel", decision="cancelled", status="accepted", decided_by=decided_by
        )
        await self.events.publish(execution_id, type="cancelled")
        spans.run_ended(execution_id, status=S.CANCELLED.value)
        # Durable before the answer: every runtime that served it is drained, also after an OE restart.
        await self.drains.drain(updated, reason="cancelled by the client")
        return updated

    async def interrupt(
        self, execution_id: str, step: int, *, decided_by: Identity | None = None
    ) -> DeliveryRecord:
        """Stop the one call at `step` of a running execution (OE-18); the execution goes on."""
        record = await self.get(execution_id)
        if record.status is not S.RUNNING:
            raise Conflict(
                "execution_not_running",
                f"the execution is {record.status.value}: only a running execution has calls to interrupt",
            )
        reg = self.registry.get(record.agent)
        if reg is None:
            raise Conflict("agent_not_registered", f"Agent {record.agent!r} is no longer registered")
        runs_in = await self._runs_in(reg, record.execution_id, step)
        delivery = await self.drains.interrupt(record, step, reg=reg, component=runs_in)
        if decided_by is not None:
            current = await self.get(execution_id)
            asked = StepDecider(step=step, by=decided_by, at=self._clock())
            await self.store.update_execution(
                execution_id, {"interrupted_by": [*current.interrupted_by, asked]}
            )
        await self._audit(
            record,
            kind="interrupt",
            step=step,
            decision="requested",
            status="accepted",
            decided_by=decided_by,
        )
        return delivery

    async def _runs_in(
        self, reg: AgentRegistration, execution_id: str, step: int
    ) -> Literal["aer", "tool"] | None:
        """Where the call at `step` runs: the AER for a local tool, the Tool Pod for the others and for model
        calls; None when the OE has not seen that step yet."""
        claimed = await self.store.get_step(execution_id, step)
        if claimed is None or claimed.tool == AGENT_SUSPEND:
            return None
        if claimed.tool == INVOKE_LLM:
            return "tool"
        entry = await self._tool_entry(reg, claimed.tool)
        if entry is None:
            return None
        return "aer" if entry.location == "local" else "tool"

    def _calls_in_flight(self, execution_id: str) -> bool:
        """True while this OE waits on a call of the execution (its pod may not have answered yet)."""
        return any(key[0] == execution_id for key in self._inflight)

    async def _claim_cancel(self, record: ExecutionRecord) -> None:
        """A cancel of a suspended execution is the decision on its suspension, claimed like a resume's; if
        a resume claimed it first, let its state change land before the cancel writes (on FerretDB v1 the
        two writes would otherwise race, and the cancel could be lost under the resume's)."""
        key = f"decision:{record.execution_id}:{len(record.reviews)}"
        taken = await self.store.claim_once(key, {"decision": "cancelled"})
        if taken is None or taken.get("decision") == "cancelled":
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _RESUME_LANDS_S
        while loop.time() < deadline:
            current = await self.store.get_execution(record.execution_id)
            if current is None or current.status is not S.SUSPENDED:
                return
            await asyncio.sleep(0.05)

    async def resume(
        self,
        execution_id: str,
        review: ReviewDecision,
        *,
        project_id: str | None = None,
        decided_by: Identity | None = None,
        announce: ReviewEvent = "review.decided",
    ) -> ExecutionRecord:
        """Record the human decision and re-run the agent from the start.

        The decision is written with the state change, in one atomic write, and nothing runs here: the
        replay applies it when the agent reaches the suspended step again (an approved call runs then, once,
        through the same path as every call). So an OE that dies right after answering loses nothing, and a
        second resume finds the execution running (409).
        """
        record = await self.get(execution_id, project_id=project_id)
        if record.status is not S.SUSPENDED:
            raise Conflict("not_suspended", _not_suspended(record))
        reg = self.registry.get(record.agent)
        if reg is None:
            raise Conflict("agent_not_registered", f"Agent {record.agent!r} is no longer registered")
        suspension = record.suspension or {}
        kind = str(suspension.get("kind") or "suspend")
        if review.args is not None and review.decision != "approved":
            raise BadReview(
                "args", "edited arguments go with an approved decision only; drop args, or approve"
            )
        if review.args is not None and kind != APPROVAL_REQUIRED:
            raise BadReview(
                "args",
                "this execution waits on app.suspend, not on the approval of a call, so there are no held "
                "arguments to edit; drop args",
            )
        value_refusal = value_problem(kind, review)
        if value_refusal is not None:
            raise BadReview("value", value_refusal)
        # One decision per suspension, claimed under a unique key: a second reviewer's different decision is
        # refused even where the state's compare-and-set is not atomic across replicas (FerretDB v1). The
        # same decision sent again (a client whose answer was lost) goes on.
        decided = {"decision": review.decision, "reviewer_notes": review.reviewer_notes, "args": review.args}
        taken = await self.store.claim_once(f"decision:{execution_id}:{len(record.reviews)}", decided)
        if taken is not None and taken != decided:
            raise Conflict(
                "already_decided",
                f"another decision ({taken.get('decision')}) was already made on this suspension; "
                "read the execution for its state",
            )
        step = suspension.get("step")
        reason = suspension.get("reason")
        now = self._clock()
        entry = Review(
            step=step if isinstance(step, int) else None,
            tool=suspension.get("tool") if isinstance(suspension.get("tool"), str) else None,
            kind=kind,
            decision=review.decision,
            reviewer_notes=review.reviewer_notes,
            args=review.args,
            reason=reason if isinstance(reason, str) else None,
            payload=suspension.get("payload"),
            value=review.value,
            at=now,
            decided_by=decided_by,
        )
        # One resume wins: the decision and the state move together, before anything runs.
        updated = await self.store.transition(
            execution_id,
            from_states=frozenset({S.SUSPENDED}),
            changes={
                "status": S.RUNNING,
                "suspension": None,
                "reviews": [*record.reviews, entry],
                "runs": record.runs + 1,
                "updated_at": now,
            },
        )
        if updated is None:
            current = await self.get(execution_id)
            raise Conflict("not_suspended", _not_suspended(current))
        self.observer.decided(record.agent, review.decision, max(0.0, now - record.updated_at))
        executed = None
        if kind == APPROVAL_REQUIRED and review.decision == "approved":
            executed = review.args if review.args is not None else suspension.get("args")
        elif kind == INTERRUPT and review.decision == "approved":
            executed = {"value": review.value}
        await self._audit(
            updated,
            kind="resume",
            step=entry.step,
            tool=entry.tool,
            decision=review.decision,
            reason=review.reviewer_notes,
            args={"requested": suspension.get("args"), "executed": executed},
            secrets=self._secrets(reg),
            status="accepted",
            decided_by=decided_by,
        )
        await self.events.publish(
            execution_id, type="resumed", step=entry.step, data={"decision": review.decision}
        )
        self._announce(reg, announce, record.model_copy(update={"reviews": updated.reviews}))
        self._spawn(self._start(updated, reg, resume=True, counted=True))
        return updated

    async def pending_reviews(
        self,
        project_id: str | None,
        *,
        limit: int = 50,
        cursor: str | None = None,
        project_ids: frozenset[str] | None = None,
    ) -> tuple[list[ExecutionRecord], str | None]:
        """The project's (or, with `project_ids`, those projects') suspended executions, newest first: each
        waits for a human's decision."""
        page = await self.store.list_executions(
            project_id=project_id, project_ids=project_ids, status=S.SUSPENDED, limit=limit, cursor=cursor
        )
        return page.items, page.next_cursor

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
            with spans.step(
                execution_id=call.execution_id,
                step=call.step,
                tool=call.tool,
                llm_id=call.llm_id,
                is_llm=call.is_llm,
            ):
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
                run=record.runs,
                created_at=now,
                updated_at=now,
            )
        )
        replay = decide_replay(fp, existing)
        if replay.kind is Replay.DIVERGED:
            return await self._diverged(record, caller, call, recorded=replay.record)
        if replay.kind is Replay.CACHED:
            assert replay.record is not None and replay.record.outcome is not None
            review = record.review_at(call.step)
            if replay.record.outcome.status == "suspend" and review is not None:
                return await self._settle(record, caller, call, replay.record, review)
            return await self._cached(record, caller, call, replay.record.outcome)
        if replay.kind is Replay.IN_PROGRESS:
            assert replay.record is not None
            # Claimed, never finished: its OE died mid-call, a retry lost its answer, or an approved call
            # is running. Nothing here runs a call twice: the Tool Pod answers a call it already ran (or
            # is running) at this (execution, step) from its memory, and a local tool claimed by an
            # earlier run is never run again.
            await self.store.reset_step(call.execution_id, call.step, owner=self.instance_id, at=now)
            held = replay.record.outcome
            review = record.review_at(call.step)
            if held is not None and held.status == "suspend" and review is not None:
                return await self._run_approved(record, caller, call, replay.record, review)
        await self.store.note_step(call.execution_id, call.step, at=now)
        return await self._decide(record, caller, call, prior=replay.record)

    async def _decide(
        self,
        record: ExecutionRecord,
        caller: AgentRegistration,
        call: ToolExecuteRequest,
        *,
        prior: StepRecord | None,
    ) -> ToolExecuteAnswer:
        """A call the cache cannot answer: police it, then suspend, route it back or run it."""
        if call.tool == AGENT_SUSPEND:
            return await self._agent_suspend(record, caller, call)
        entry = None if call.is_llm else await self._tool_entry(caller, call.tool)
        if entry is None and not call.is_llm:
            return await self._deny(
                record, caller, call, f"unknown tool {call.tool!r}: the Agent has no such tool"
            )
        usage = await self.limiter.count_call(caller, record, is_llm=call.is_llm)
        if (refusal := await self.limiter.check_call(caller, record, usage, is_llm=call.is_llm)) is not None:
            return await self._refuse(record, caller, call, refusal)
        verdict = decide(
            caller.policy,
            tool=call.tool,
            sensitive=bool(entry and entry.sensitive),
            facts=condition_facts(
                tool=call.tool,
                args=call.args if not call.is_llm else {"llm_id": call.llm_id or "default"},
                agent=caller.agent,
                user=record.user_id,
                step=call.step,
                usage=usage,
            ),
        )
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
            held = stamp(held, verdict.approval, now=self._clock())  # its deadline, when one is set
            if call.is_llm:
                held["llm"] = self._llm_request(call).model_dump(mode="json")
            return await self._finish(
                record, caller, call, CallOutcome(status="suspend", result=held), decision="approval"
            )
        if not call.is_llm and (refusal := await self.limiter.take_rate(caller, tool=call.tool)) is not None:
            return await self._refuse(record, caller, call, refusal)
        if entry is not None and entry.location == "local":
            if prior is not None and prior.run < record.runs:
                return await self._outcome_unknown(record, caller, call, prior)
            return await self._route_local(record, caller, call)
        await self.events.publish(
            call.execution_id,
            type="step_started",
            step=call.step,
            data={"tool": call.tool, "route": "tool_pod"},
        )
        forwarded = self._redactor(caller)  # nothing the OE knows as a secret goes on to the Tool Pod
        partial: str | None = None
        if call.is_llm:
            request = self._llm_request(call)
            request.messages = forwarded.value(request.messages)
            outcome, partial = await self._model_call(record, caller, call, request)
        else:
            outcome = await self.runtimes.execute_tool(
                caller,
                tool=call.tool,
                arguments=forwarded.value(call.args),
                execution_id=call.execution_id,
                step=call.step,
                user_id=record.user_id,
                org_id=record.org_id,
            )
        if outcome.status == "suspend":
            outcome = outcome.model_copy(update={"result": _suspend_payload(call, outcome.result)})
        return await self._finish(
            record, caller, call, outcome, decision="allow", route="tool_pod", partial_text=partial
        )

    async def _model_call(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest, request: Any
    ) -> tuple[CallOutcome, str | None]:
        """The model call, streamed as `llm_delta` events when its client or its agent asked (issue 32);
        with the text a stopped stream had sent, for the audit."""
        if not wants_stream(record, call):
            return await self.runtimes.invoke_llm(caller, request), None
        # A cancel while the model streams must reach the Tool Pod now (it closes the provider's
        # request), not once the call has ended: note it as serving the execution before the call.
        await self.drains.served(
            call.execution_id, "tool", pod_name=None, address=None, fallback=caller.tool_url
        )
        streamed = await streamed_llm_call(
            self.runtimes,
            caller,
            request,
            redactor=self._redactor(caller),
            publish=self._delta_publisher(call),
        )
        return streamed.outcome, streamed.partial_text

    def _delta_publisher(self, call: ToolExecuteRequest) -> Any:
        async def publish(delta: Any) -> None:
            await self.events.publish(
                call.execution_id, type=LLM_DELTA, step=call.step, data=delta_data(delta)
            )

        return publish

    def _step_event(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest, answer: Any
    ) -> dict[str, Any]:
        """`step_finished`'s data: the status, and the result as the client may see it (issue 32)."""
        data = _step_data(call, answer)
        if self.streaming.step_results and record.step_results and answer.status in ("success", "error"):
            data.update(
                step_content(
                    result=answer.result,
                    error=answer.error,
                    secrets=(*self._secrets(caller), *self._known_secrets()),
                    max_bytes=self.streaming.step_result_max_bytes,
                )
            )
        return data

    async def _cached(
        self,
        record: ExecutionRecord,
        caller: AgentRegistration,
        call: ToolExecuteRequest,
        outcome: CallOutcome,
    ) -> ToolExecuteAnswer:
        answer = _answer(call.step, outcome, from_cache=True)
        if outcome.status == "suspend":
            # A replay that reaches a suspension nobody decided yet suspends again, on the same payload.
            await self._hold(call.execution_id, outcome.result)
        await self._audit_call(record, call, caller, decision="cached", route="cache", answer=answer)
        if wants_stream(record, call):
            # A replayed model step: its cached final message as one delta (issue 32).
            await publish_cached(
                outcome, step=call.step, publish=self._delta_publisher(call), redactor=self._redactor(caller)
            )
        await self.events.publish(
            call.execution_id,
            type="step_finished",
            step=call.step,
            data=self._step_event(record, caller, call, answer),
        )
        return answer

    async def _agent_suspend(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest
    ) -> ToolExecuteAnswer:
        """`app.suspend` in agent code: held at its step like an approval; answered later by the human."""
        reason = call.args.get("reason")
        held = {
            "kind": agent_hold_kind(call.args),
            "reason": reason if isinstance(reason, str) else "suspended",
            "payload": call.args.get("payload"),
            "step": call.step,
            "tool": AGENT_SUSPEND,
        }
        return await self._finish(
            record, caller, call, CallOutcome(status="suspend", result=held), decision="suspend"
        )

    async def _settle(
        self,
        record: ExecutionRecord,
        caller: AgentRegistration,
        call: ToolExecuteRequest,
        step: StepRecord,
        review: Review,
    ) -> ToolExecuteAnswer:
        """The replay reached a suspended step a human has decided: give it its final outcome."""
        assert step.outcome is not None
        held = step.outcome.result if isinstance(step.outcome.result, dict) else {}
        if held.get("kind") != APPROVAL_REQUIRED:
            # `app.suspend` (in a tool or in agent code): the step's answer is the human's decision.
            answer = decided_answer(
                kind=review.kind,
                decision=review.decision,
                reviewer_notes=review.reviewer_notes,
                value=review.value,
            )
            decided = CallOutcome(status="success", result=answer)
            return await self._finish(record, caller, call, decided, decision="reviewed")
        if review.decision == "rejected":
            note = review.reviewer_notes or "no notes"
            rejected = CallOutcome(
                status="error",
                error=CallError(category=REJECTED_BY_REVIEWER, explanation=f"rejected by reviewer: {note}"),
            )
            return await self._finish(record, caller, call, rejected, decision="rejected")
        now = self._clock()
        if await self.store.reopen_step(
            call.execution_id, call.step, owner=self.instance_id, run=record.runs, at=now
        ):
            return await self._run_approved(
                record, caller, call, step.model_copy(update={"run": record.runs}), review
            )
        # Another replica (or an earlier attempt) reopened it first.
        current = await self.store.get_step(call.execution_id, call.step)
        if current is None:
            raise Conflict("step_lost", f"step {call.step} disappeared while it was being approved")
        if current.state == "done" and current.outcome is not None:
            return await self._cached(record, caller, call, current.outcome)
        return await self._run_approved(record, caller, call, current, review)

    async def _run_approved(
        self,
        record: ExecutionRecord,
        caller: AgentRegistration,
        call: ToolExecuteRequest,
        step: StepRecord,
        review: Review,
    ) -> ToolExecuteAnswer:
        """Run the call a reviewer approved, with the arguments the reviewer sent (or the held ones)."""
        assert step.outcome is not None
        held = step.outcome.result if isinstance(step.outcome.result, dict) else {}
        args = review.args if review.args is not None else dict(held.get("args") or {})
        entry = None if call.is_llm else await self._tool_entry(caller, step.tool)
        if entry is not None and entry.location == "local":
            if step.run < record.runs:
                return await self._outcome_unknown(record, caller, call, step)
            return await self._route_local(record, caller, call, args=args, decision="approved")
        await self.events.publish(
            call.execution_id,
            type="step_started",
            step=call.step,
            data={"tool": step.tool, "route": "tool_pod", "approved": True},
        )
        forwarded = self._redactor(caller)
        partial: str | None = None
        if held.get("llm"):
            request = InvokeLLMRequest.model_validate(forwarded.value(held["llm"]))
            outcome, partial = await self._model_call(record, caller, call, request)
        else:
            outcome = await self.runtimes.execute_tool(
                caller,
                tool=step.tool,
                arguments=forwarded.value(args),
                execution_id=call.execution_id,
                step=call.step,
                user_id=record.user_id,
                org_id=record.org_id,
            )
        if outcome.status == "suspend":
            outcome = outcome.model_copy(update={"result": _suspend_payload(call, outcome.result)})
        return await self._finish(
            record,
            caller,
            call,
            outcome,
            decision="approved",
            route="tool_pod",
            executed_args=args,
            partial_text=partial,
        )

    async def _outcome_unknown(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest, step: StepRecord
    ) -> ToolExecuteAnswer:
        """A local tool an earlier run was running when that run was lost: it may have taken effect (the
        OE cannot tell), so it is not run again; the model sees a tool error and the turn goes on."""
        unknown = CallOutcome(
            status="error",
            error=CallError(
                category=OUTCOME_UNKNOWN,
                explanation=(
                    f"tool {call.tool!r} was running in the AER at step {call.step} (run {step.run}) when "
                    "that run was lost; it may have taken effect, so it is not run again"
                ),
            ),
        )
        return await self._finish(record, caller, call, unknown, decision="outcome_unknown", route="none")

    async def graph_stream(self, caller: AgentRegistration, chunk: GraphStreamChunk) -> None:
        """Publish one LangGraph stream-mode chunk of the caller's own running execution (issue 32)."""
        record = await self._owned(caller, chunk.execution_id)
        refusal = chunk_refusal(record, mode=chunk.mode)
        if refusal is not None:
            raise Conflict("stream_refused", refusal)
        data = chunk_event_data(
            chunk.data,
            secrets=(*self._secrets(caller), *self._known_secrets()),
            max_bytes=self.streaming.step_result_max_bytes,
        )
        await self.events.publish(chunk.execution_id, type=chunk.mode, data=data)

    async def tool_result(self, caller: AgentRegistration, report: ToolResultRequest) -> None:
        """Store a local tool's outcome as its step's final one; the same report twice is a no-op."""
        record = await self._owned(caller, report.execution_id)
        step = await self.store.get_step(report.execution_id, report.step)
        if step is None:
            raise NotFound(f"no step {report.step} in execution {report.execution_id!r}")
        result = report.result
        if report.status == "suspend":
            result = {**(result if isinstance(result, dict) else {}), "kind": "suspend"}
            result.update(step=report.step, tool=step.tool)
        outcome = self._scrubbed(
            CallOutcome(
                status=report.status, result=result, error=report.error, duration_ms=report.duration_ms or 0.0
            ),
            caller,
        )
        if step.state == "done":
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
        report = self._scrubbed_callback(report, caller)
        target = state_of_callback(report.status)
        now = self._clock()
        changes: dict[str, Any] = {"status": target, "updated_at": now}
        if target is S.COMPLETED:
            changes.update(result=report.result, finished_at=now, suspension=None)
        elif target is S.FAILED:
            changes.update(
                error=report.error or CallError(category="failed"), finished_at=now, suspension=None
            )
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
        spans.run_ended(
            report.execution_id,
            status=target.value,
            error_category=report.error.category if report.error else None,
        )
        data: dict[str, Any] = {}
        if report.error is not None:
            data["error"] = report.error.model_dump()
        if target is S.SUSPENDED and updated.suspension is not None:
            data["suspension"] = redact_value(updated.suspension, secrets=self._secrets(caller))
        await self.events.publish(report.execution_id, type=target.value, data=data)
        if target is S.SUSPENDED:
            self._announce(caller, "review.created", updated)
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
        """Look after running executions whose AER has been quiet: a run the AER no longer has (it
        restarted) is started again, up to `run_restarts` times; an AER that cannot be reached for
        `aer_lost_after_s` more fails it (`aer_lost`). Returns how many were failed."""
        failed = 0
        cursor: str | None = None
        now = self._clock()
        await self._expire_approvals(now)
        while True:
            page = await self.store.list_executions(status=S.RUNNING, limit=200, cursor=cursor)
            for record in page.items:
                if now - record.updated_at < self._aer_lost_after_s:
                    continue
                if not await self.leases.acquire(watchdog_key(record.execution_id), now=now):
                    continue  # another replica looks after it
                if await self._look_after(record, now=now):
                    failed += 1
            if page.next_cursor is None:
                return failed
            cursor = page.next_cursor

    async def _expire_approvals(self, now: float) -> int:
        """Decide every held call whose approval deadline passed, as its rule's onTimeout says, recorded as
        decided by the system (issue 34); a replica that decided first wins (the others get a Conflict)."""
        decided = 0
        cursor: str | None = None
        while True:
            page = await self.store.list_executions(status=S.SUSPENDED, limit=200, cursor=cursor)
            for record in page.items:
                expiry = expired(record.suspension, now=now)
                if expiry is None:
                    continue
                try:
                    await self.resume(
                        record.execution_id,
                        ReviewDecision(decision=expiry.decision, reviewer_notes=expiry.notes),
                        decided_by=Identity(username=SYSTEM_DECIDER),
                        announce="review.expired",
                    )
                except (Conflict, NotFound):
                    continue
                decided += 1
            if page.next_cursor is None:
                return decided
            cursor = page.next_cursor

    async def _look_after(self, record: ExecutionRecord, *, now: float) -> bool:
        """One quiet running execution; True if it was failed."""
        execution_id = record.execution_id
        reg = self.registry.get(record.agent)
        alive = None if reg is None else await self.runtimes.execution_alive(reg, execution_id)
        if alive:
            self._unreachable.pop(execution_id, None)
            await self.store.update_execution(execution_id, {"updated_at": now})
            return False
        if alive is None or reg is None:
            first = self._unreachable.setdefault(execution_id, now)
            if now - first < self._aer_lost_after_s:
                return False  # a restarting AER gets as long again to come back
            self._unreachable.pop(execution_id, None)
            unreachable = CallError(category=AER_LOST, explanation="the AER could not be reached")
            return await self._fail(record, unreachable)
        self._unreachable.pop(execution_id, None)
        if record.restarts >= self._run_restarts:
            why = f"the AER lost the run {record.restarts + 1} times"
            return await self._fail(record, CallError(category=AER_LOST, explanation=why))
        # The AER answers but does not run it: it restarted mid-run, or never got the run (its OE died
        # first). Run it again: the replay answers every step already held, so nothing runs twice.
        restarted = await self.store.transition(
            execution_id,
            from_states=frozenset({S.RUNNING}),
            changes={"restarts": record.restarts + 1, "runs": record.runs + 1, "updated_at": now},
        )
        if restarted is None:
            return False
        logger.warning("execution %s: its AER no longer runs it; starting it again", execution_id)
        await self._audit(restarted, kind="restart", decision="restarted", status="accepted", reason=AER_LOST)
        await self.events.publish(execution_id, type="restarted", data={"restarts": restarted.restarts})
        self._spawn(self._start(restarted, reg, resume=True, counted=True))
        return False

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.notifier.aclose()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _start(
        self, record: ExecutionRecord, reg: AgentRegistration, *, resume: bool, counted: bool = False
    ) -> None:
        """`_start_run` under the run's span (a child of the execution's: one execution, one trace)."""
        number = record.runs if counted else record.runs + 1
        with spans.run(
            execution_id=record.execution_id,
            agent=record.agent,
            trace_context=record.trace_context,
            number=number,
            resume=resume,
        ):
            await self._start_run(record, reg, resume=resume, counted=counted)

    async def _start_run(
        self, record: ExecutionRecord, reg: AgentRegistration, *, resume: bool, counted: bool = False
    ) -> None:
        """Hand a run to the AER. `counted`: the caller's own write already counted this run (a resume or a
        restart does, so that no second write to the execution follows it: on FerretDB v1 a write a moment
        later on another replica, a cancel, could be lost under it)."""
        if counted:
            started = record
        elif not resume:
            started = await self.store.transition(
                record.execution_id,
                from_states=frozenset({S.PENDING}),
                changes={"status": S.RUNNING, "runs": record.runs + 1, "updated_at": self._clock()},
            )
            if started is None:
                return  # cancelled before it started, or another replica started it
            await self.events.publish(record.execution_id, type="running")
        else:
            started = await self.store.transition(
                record.execution_id,
                from_states=frozenset({S.RUNNING}),
                changes={"runs": record.runs + 1, "updated_at": self._clock()},
            )
            if started is None:
                return  # cancelled (or failed) meanwhile
        request = AERExecuteRequest(
            execution_id=started.execution_id,
            workspace_id=started.workspace_id,
            session_id=started.session_id,
            user_id=started.user_id,
            org_id=started.org_id,
            input=started.input,
            resume=resume,
            suspend_replies=_suspend_replies(started),
            stream_mode=started.stream_mode,
        )
        # A restarting AER refuses connections for a moment: retry for as long as the watchdog would wait,
        # then leave the run to the watchdog, which starts it once the AER answers or fails it (`aer_lost`)
        # when the AER stays out of reach.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._aer_lost_after_s
        delay = 0.2
        while True:
            try:
                accepted = await self.runtimes.start_run(reg, request)
                # The pod that took the run is where a drain of it goes (Decision 8).
                await self.drains.served(
                    started.execution_id,
                    "aer",
                    pod_name=accepted.pod_name if accepted else None,
                    address=accepted.pod_address if accepted else None,
                    fallback=reg.aer_url,
                )
                return
            except RuntimeUnavailable as exc:
                if not exc.retryable:
                    await self._fail(started, CallError(category=AER_LOST, explanation=str(exc)))
                    return
                if loop.time() + delay > deadline:
                    logger.warning("execution %s: %s; the watchdog takes it over", started.execution_id, exc)
                    return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
            current = await self.store.get_execution(started.execution_id)
            if current is None or current.status is not S.RUNNING:
                return

    async def _hold(self, execution_id: str, payload: Any) -> None:
        """Remember which step suspended the run and what it asks, for the callback and the resume; of
        several suspended steps in one run (calls made together), the first in program order is asked."""
        held = payload if isinstance(payload, dict) else {"reason": str(payload)}
        current = await self.store.get_execution(execution_id)
        before = current.suspension if current is not None else None
        earlier = (
            before is not None
            and isinstance(before.get("step"), int)
            and isinstance(held.get("step"), int)
            and before["step"] < held["step"]
        )
        if earlier:
            return
        await self.store.update_execution(execution_id, {"suspension": held})

    async def _fail(self, record: ExecutionRecord, error: CallError) -> bool:
        now = self._clock()
        updated = await self.store.transition(
            record.execution_id,
            from_states=frozenset({S.PENDING, S.RUNNING}),
            changes={"status": S.FAILED, "error": error, "updated_at": now, "finished_at": now},
        )
        if updated is None:
            return False
        self._unreachable.pop(record.execution_id, None)
        spans.run_ended(record.execution_id, status=S.FAILED.value, error_category=error.category)
        self.observer.execution_failed(record.agent, error.category)
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
            raise NotFound(f"no execution {execution_id!r}")
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
        self,
        record: ExecutionRecord,
        caller: AgentRegistration,
        call: ToolExecuteRequest,
        *,
        args: dict[str, Any] | None = None,
        decision: str = "allow",
    ) -> ToolExecuteAnswer:
        """An allowed local tool goes back to the AER's call stack; its `/tool/result` finishes the step."""
        answer = ToolExecuteAnswer(step=call.step, proceed=True, route_to="callback", args=args)
        await self._audit_call(
            record, call, caller, decision=decision, route="callback", answer=answer, executed_args=args
        )
        await self.events.publish(
            call.execution_id,
            type="step_started",
            step=call.step,
            data={"tool": call.tool, "route": "callback"},
        )
        return answer

    async def _refuse(
        self, record: ExecutionRecord, caller: AgentRegistration, call: ToolExecuteRequest, refusal: Refusal
    ) -> ToolExecuteAnswer:
        """A limit reached (issue 34): the call does not run, the refusal is audited with the limit and
        the figure, and the execution fails with `budget_exceeded` or `rate_limited` (onExceed: fail)."""
        await self.store.delete_step(call.execution_id, call.step)
        answer = ToolExecuteAnswer(step=call.step, proceed=False, reason=refusal.message)
        await self._audit(
            record,
            kind="llm" if call.is_llm else "tool",
            step=call.step,
            tool=call.tool,
            llm_id=call.llm_id,
            decision="refused",
            reason=refusal.message,
            route="none",
            error_category=refusal.category,
            detail=refusal_detail(refusal),
        )
        await self._fail(record, CallError(category=refusal.category, explanation=refusal.message))
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
        executed_args: dict[str, Any] | None = None,
        partial_text: str | None = None,
    ) -> ToolExecuteAnswer:
        outcome = self._scrubbed(outcome, caller)
        await self.store.finish_step(call.execution_id, call.step, outcome, at=self._clock())
        if route == "tool_pod" and (outcome.pod_name or outcome.pod_address):
            # The pod that answered served the execution: a drain of it goes there too (Decision 8).
            await self.drains.served(
                call.execution_id,
                "tool",
                pod_name=outcome.pod_name,
                address=outcome.pod_address,
                fallback=caller.tool_url,
            )
        if outcome.status == "suspend":
            await self._hold(call.execution_id, outcome.result)
        answer = _answer(call.step, outcome, from_cache=False)
        if executed_args is not None and executed_args != call.args:
            # A reviewer's edit: the runtime puts the arguments that ran in the agent's state (issue 31).
            answer = answer.model_copy(update={"args": executed_args})
        await self._audit_call(
            record,
            call,
            caller,
            decision=decision,
            route=route,
            answer=answer,
            executed_args=executed_args,
            partial_text=partial_text,
        )
        await self.events.publish(
            call.execution_id,
            type="step_finished",
            step=call.step,
            data=self._step_event(record, caller, call, answer),
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
        executed_args: dict[str, Any] | None = None,
        partial_text: str | None = None,
    ) -> None:
        asked: Any = call.messages if call.is_llm else call.args
        if executed_args is not None and executed_args != call.args:
            # A reviewer edited them: the audit keeps what was asked and what ran.
            asked = {"requested": call.args, "executed": executed_args}
        metered = model_usage(answer.result if call.is_llm and answer and not answer.from_cache else None)
        usage, model = metered if metered is not None else (None, None)
        cost_of = cost(usage, model, self.prices.overridden_by(caller.prices)) if usage else None
        error_category = answer.error.category if answer and answer.error else None
        spans.annotate_step(
            decision=decision,
            route=route,
            from_cache=bool(answer and answer.from_cache),
            status=answer.status if answer else None,
            error_category=error_category,
            model=model,
            usage=usage,
            cost=cost_of,
            arguments=asked,
            secrets=self._secrets(caller),
        )
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
            error_category=error_category,
            duration_ms=answer.duration_ms if answer else None,
            pod_name=answer.pod_name if answer else None,
            usage=usage,
            model=model,
            cost=cost_of,
            # A stopped stream's text as its client saw it (issue 32), cut like any audited value.
            partial_text=audit_value(partial_text, secrets=self._secrets(caller)) if partial_text else None,
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
        metered = fields.get("usage")
        if kind == "llm" and metered is not None:
            await self.limiter.metered(record, tokens=metered.total_tokens, cost=fields.get("cost"))

    async def verify_audit(self, execution_id: str) -> dict[str, Any]:
        """Whether the execution's audit chain is intact, or where it breaks (issue 34)."""
        record = await self.get(execution_id)
        verdict = await self.ledger.verify(record.execution_id)
        return {"execution_id": record.execution_id, **verdict.view()}

    def _announce(self, reg: AgentRegistration | None, event: ReviewEvent, record: ExecutionRecord) -> None:
        """Tell the Agent's spec.notify targets about a review, in the background (never blocks)."""
        if reg is None or not reg.notify:
            return
        view = review_view(record, secrets=(*self._secrets(reg), *self._known_secrets()))
        if record.reviews and event != "review.created":
            last = record.reviews[-1]
            view["decision"] = last.decision
            view["decided_by"] = last.decided_by.username if last.decided_by else None
        self.notifier.send(reg.notify, event, view)

    @staticmethod
    def _secrets(reg: AgentRegistration) -> tuple[str, ...]:
        return reg.tokens()  # the previous one too, while a rotation's grace period lasts

    def _redactor(self, caller: AgentRegistration) -> Redactor:
        """Every value the OE knows as a secret for this caller: its tokens and the OE's client token."""
        return redactor_for((*caller.tokens(), *self._known_secrets()))

    def _scrubbed(self, outcome: CallOutcome, caller: AgentRegistration) -> CallOutcome:
        """The outcome without any value the OE knows as a secret (in any encoding), before it is stored
        (step, replay cache) or forwarded (the AER, the model's next request)."""
        redactor = self._redactor(caller)
        result = redactor.value(outcome.result)
        error = redacted_error(outcome.error, redactor) if outcome.error is not None else None
        if result is outcome.result and error is outcome.error:
            return outcome
        return outcome.model_copy(update={"result": result, "error": error})

    def _scrubbed_callback(self, report: ExecutorCallback, caller: AgentRegistration) -> ExecutorCallback:
        """The same for an execution's end: its result, error and suspension metadata."""
        redactor = self._redactor(caller)
        update = {
            "result": redactor.value(report.result),
            "error": redacted_error(report.error, redactor) if report.error is not None else None,
            "metadata": redactor.value(report.metadata),
        }
        if all(update[name] is getattr(report, name) for name in update):
            return report
        return report.model_copy(update=update)


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


def _not_suspended(record: ExecutionRecord) -> str:
    """Why a resume cannot apply, in words a client retrying a lost answer can act on."""
    if record.reviews and record.status is not S.SUSPENDED:
        last = record.reviews[-1]
        return (
            f"the execution is {record.status.value}, not suspended: it was already resumed "
            f"({last.decision}{f' at step {last.step}' if last.step is not None else ''})"
        )
    return f"the execution is {record.status.value}, not suspended; only a suspended execution resumes"


def _suspend_replies(record: ExecutionRecord) -> list[SuspendReply]:
    """The decisions that answer agent-level `app.suspend` calls, for a run to return synchronously."""
    return [
        SuspendReply(
            step=review.step,
            reason=review.reason or "",
            payload=review.payload,
            decision=review.decision,
            reviewer_notes=review.reviewer_notes,
            kind=review.kind,
            value=review.value,
        )
        for review in record.reviews
        if review.tool == AGENT_SUSPEND and review.step is not None
    ]


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

    iso = _iso

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
    if record.invoked_by is not None:
        view["invoked_by"] = record.invoked_by.model_dump()
    if record.cancelled_by is not None:
        view["cancelled_by"] = record.cancelled_by.model_dump()
    if record.interrupted_by:
        view["interrupted_by"] = [
            {"step": asked.step, "by": asked.by.model_dump(), "at": iso(asked.at)}
            for asked in record.interrupted_by
        ]
    if record.status is S.COMPLETED:
        view["result"] = record.result
    if record.error is not None:
        view["error"] = record.error.model_dump(exclude_none=True)
    if record.suspension is not None:
        view["suspension"] = redact_value(record.suspension, secrets=secrets)
    if record.reviews:
        view["reviews"] = [
            {
                **redact_value(
                    review.model_dump(
                        mode="json", exclude={"at", "decided_by"} if review.decided_by is None else {"at"}
                    ),
                    secrets=secrets,
                ),
                "at": iso(review.at),
            }
            for review in record.reviews
        ]
    if record.restarts:
        view["restarts"] = record.restarts
    return view


def review_view(record: ExecutionRecord, *, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """A suspended execution as a reviewer sees it: what it asks, and where to send the decision."""
    held = redact_value(record.suspension or {}, secrets=secrets)
    asks = {key: held[key] for key in ("kind", "step", "tool", "args", "reason", "payload") if key in held}
    asks.setdefault("kind", "suspend")
    decisions = ["approved", "rejected"]
    return {
        "execution_id": record.execution_id,
        "agent": record.agent,
        "project_id": record.project_id,
        "session_id": record.session_id,
        "user_id": record.user_id,
        "waiting_since": _iso(record.updated_at),
        "created_at": _iso(record.created_at),
        "asks": asks,
        "decisions": decisions,
        "may_edit_args": asks["kind"] == APPROVAL_REQUIRED,
        "may_send_value": asks["kind"] == INTERRUPT,
        "resume": f"/api/v1/projects/{record.project_id}/executions/{record.execution_id}/resume",
    }


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}Z"
