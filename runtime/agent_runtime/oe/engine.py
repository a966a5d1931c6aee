"""The Orchestration Engine as one object for the HTTP layer: it wires the parts and holds nothing else.

Each part has one reason to change (issue 42), as the operator's `apply.Operator` was split:

- `executions.py`: `/invoke`, reading an execution, the owner check of every runtime call;
- `steps.py`: one `/tool/execute` through owner -> replay -> policy -> route (`step_routes.py`) -> settle
  -> record, and a local tool's `/tool/result`; its decisions are `step_plan.py`'s pure functions;
- `resumes.py`: a human's decision, the inbox, approval deadlines; decisions in `resume_plan.py`;
- `cancellation.py`: cancel and interrupt; `recovery.py`: pending runs after a start and the watchdog;
- `run_reports.py`: the end of a run (decisions in `run_end.py`) and LangGraph stream chunks;
- `runs.py`: handing a run to the AER, holds, failing; `recorder.py`: audit records and step events;
- `views.py`: how clients and reviewers see an execution; `errors.py`: what the parts raise.

The HTTP handlers in `servers/oe.py` authenticate the caller and turn the parts' exceptions into status
codes; no part imports HTTP.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from agent_runtime.oe.admissions import Admissions
from agent_runtime.oe.audit_ledger import AuditExport, AuditLedger, Signer
from agent_runtime.oe.cancellation import Cancellation
from agent_runtime.oe.children import Children, MayInvoke
from agent_runtime.oe.context import EngineContext, Registrations, Secrets
from agent_runtime.oe.drains import DrainCaller, DrainCallerSettings
from agent_runtime.oe.errors import BadReview, Conflict, NotFound, UnknownAgent
from agent_runtime.oe.events import EventBus
from agent_runtime.oe.executions import Executions
from agent_runtime.oe.forks import Forks
from agent_runtime.oe.holds import APPROVAL_REQUIRED
from agent_runtime.oe.leases import leases_for
from agent_runtime.oe.limiter import Limiter
from agent_runtime.oe.limits import Limits
from agent_runtime.oe.notify import Notifier, NotifySettings, ReviewEvent
from agent_runtime.oe.observer import ObservedStore, Observer
from agent_runtime.oe.recorder import Recorder
from agent_runtime.oe.recovery import Recovery
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.resumes import Resumes
from agent_runtime.oe.review_notices import ReviewNotices
from agent_runtime.oe.run_reports import RunReports
from agent_runtime.oe.runs import Runs
from agent_runtime.oe.runtimes import Runtimes
from agent_runtime.oe.steps import Steps
from agent_runtime.oe.store.base import ExecutionRecord, Identity, Store
from agent_runtime.oe.store.deliveries import DeliveryRecord
from agent_runtime.oe.stream_settings import StreamSettings
from agent_runtime.oe.tool_lookup import ToolLookup
from agent_runtime.oe.usage import PriceTable
from agent_runtime.oe.views import client_view, review_view
from agent_runtime.protocol import (
    ExecutorCallback,
    GraphStreamChunk,
    InvokeRequest,
    ReviewDecision,
    ToolExecuteAnswer,
    ToolExecuteRequest,
    ToolResultRequest,
)


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
        audit_export: AuditExport | None = None,
        notify_settings: NotifySettings | None = None,
    ) -> None:
        # Every audit append, here and in the drains, is followed by the chain's signed head (issue 34).
        self.ledger = AuditLedger(
            store, signer=audit_signer, public_keys=audit_public_keys, export=audit_export
        )
        store = self.ledger.wrap(store)
        self.registry = registry
        self.runtimes = runtimes
        self.events = events or EventBus(store=store)
        # Model deltas, step results in events, each event-stream client's buffer (issue 32).
        self.streaming = streaming or StreamSettings()
        self.events.subscribers.limit = self.streaming.subscriber_buffer
        self.events.retain(self.streaming.retention)  # old stream events go (oe/event_retention.py)
        self.instance_id = instance_id or uuid.uuid4().hex
        self.ctx = EngineContext(
            store=store,
            registry=registry,
            runtimes=runtimes,
            events=self.events,
            clock=clock,
            instance_id=self.instance_id,
            # Secrets the OE holds beyond the Agents' tokens (its client token): never stored or forwarded.
            secrets=Secrets(known=known_secrets),
            streaming=self.streaming,
        )
        # Several replicas share the watchdog and drain work: one looks after each execution at a time,
        # another takes over once the lease runs out (oe/leases.py).
        self.leases = leases_for(store, holder=self.instance_id, term_s=max(2 * aer_lost_after_s, 5.0))
        # Model -> price per million tokens: a model step's cost in its audit record (agent_runtime.oe.usage).
        self.prices = prices or PriceTable()
        # Issue 34: spec.limits over the store's counters, the audit's signed chain heads, review notices.
        self.limiter = Limiter(store, clock=clock, defaults=default_limits)
        self.notifier = Notifier(settings=notify_settings, clock=clock)
        # Drains of cancelled executions and interrupts of calls, delivered by `drains.run` (OE-17, OE-18).
        self.drains = DrainCaller(
            leases=self.leases,
            store=store,
            registry=registry,
            events=self.events,
            settings=drain_settings,
            clock=clock,
            busy=lambda execution_id: self.steps.in_flight(execution_id),
        )
        tools = ToolLookup(runtimes, clock=clock)
        recorder = Recorder(self.ctx, prices=self.prices, limiter=self.limiter)
        notices = ReviewNotices(self.notifier, secrets=self.ctx.secrets)
        self.runs = Runs(self.ctx, drains=self.drains, aer_lost_after_s=aer_lost_after_s)
        self.executions = Executions(self.ctx, limiter=self.limiter, runs=self.runs)
        self.forks = Forks(self.ctx, runs=self.runs)
        # agentRef tools (issue 38): child executions, lifted parents' holds (the resume is bound late).
        self.children = Children(
            self.ctx,
            executions=self.executions,
            recorder=recorder,
            resume=lambda execution_id, review, *, decided_by, by_child: self.reviews.resume(
                execution_id, review, decided_by=decided_by, by_child=by_child
            ),
            cancel=lambda execution_id, by: self.cancellation.cancel(execution_id, decided_by=by),
        )
        self.ctx.settled = self.children.ended
        self.steps = Steps(
            self.ctx,
            executions=self.executions,
            recorder=recorder,
            runs=self.runs,
            tools=tools,
            limiter=self.limiter,
            drains=self.drains,
            children=self.children,
        )
        self.reviews = Resumes(
            self.ctx, executions=self.executions, recorder=recorder, runs=self.runs, notices=notices
        )
        self.cancellation = Cancellation(
            self.ctx, executions=self.executions, recorder=recorder, drains=self.drains, tools=tools
        )
        self.run_reports = RunReports(
            self.ctx, executions=self.executions, recorder=recorder, notices=notices
        )
        # onLimit: queue: queued executions start, oldest first, when a slot frees (issue 34).
        self.admissions = Admissions(self.ctx, limiter=self.limiter, runs=self.runs, leases=self.leases)
        self.ctx.slot_freed = self.admissions.kick
        self.recovery = Recovery(
            self.ctx,
            recorder=recorder,
            runs=self.runs,
            resumes=self.reviews,
            admissions=self.admissions,
            children=self.children,
            leases=self.leases,
            aer_lost_after_s=aer_lost_after_s,
            run_restarts=run_restarts,
        )

    @property
    def store(self) -> Store:
        return self.ctx.store

    @property
    def observer(self) -> Observer:
        return self.ctx.observer

    def observe(self, observer: Observer) -> None:
        """Show `observer` (the metrics) every audit record, failure and human decision from now on."""
        self.ctx.observer = observer
        self.ctx.store = ObservedStore(self.ctx.store, observer)  # type: ignore[assignment]
        self.drains.store = self.ctx.store

    # client API ---------------------------------------------------------------------------------------

    def memory_export_statement(
        self, agent: str, *, user_id: str, org_id: str | None
    ) -> tuple[str, float] | None:
        return self.executions.memory_export_statement(agent, user_id=user_id, org_id=org_id)

    async def invoke(
        self,
        request: InvokeRequest,
        *,
        invoked_by: Identity | None = None,
        execution_id: str | None = None,
    ) -> ExecutionRecord:
        """`execution_id`: the id the caller claimed for it (an A2A message sent again finds it)."""
        return await self.executions.invoke(request, invoked_by=invoked_by, execution_id=execution_id)

    async def fork(
        self,
        execution_id: str,
        *,
        step: int,
        agent: str,
        session_id: str | None = None,
        invoked_by: Identity | None = None,
    ) -> ExecutionRecord:
        """A finished execution's turn again in a new session, steps before `step` cached (oe/forks.py)."""
        return await self.forks.fork(
            execution_id, step=step, agent=agent, session_id=session_id, invoked_by=invoked_by
        )

    async def get(self, execution_id: str, *, project_id: str | None = None) -> ExecutionRecord:
        return await self.executions.get(execution_id, project_id=project_id)

    async def cancel(self, execution_id: str, *, decided_by: Identity | None = None) -> ExecutionRecord:
        return await self.cancellation.cancel(execution_id, decided_by=decided_by)

    async def interrupt(
        self, execution_id: str, step: int, *, decided_by: Identity | None = None
    ) -> DeliveryRecord:
        return await self.cancellation.interrupt(execution_id, step, decided_by=decided_by)

    async def resume(
        self,
        execution_id: str,
        review: ReviewDecision,
        *,
        project_id: str | None = None,
        decided_by: Identity | None = None,
        announce: ReviewEvent = "review.decided",
    ) -> ExecutionRecord:
        return await self.reviews.resume(
            execution_id, review, project_id=project_id, decided_by=decided_by, announce=announce
        )

    async def pending_reviews(
        self,
        project_id: str | None,
        *,
        limit: int = 50,
        cursor: str | None = None,
        project_ids: frozenset[str] | None = None,
    ) -> tuple[list[ExecutionRecord], str | None]:
        return await self.reviews.pending(project_id, limit=limit, cursor=cursor, project_ids=project_ids)

    async def verify_audit(self, execution_id: str) -> dict[str, Any]:
        """Whether the execution's audit chain is intact, or where it breaks (issue 34)."""
        record = await self.executions.get(execution_id)
        verdict = await self.ledger.verify(record.execution_id)
        return {"execution_id": record.execution_id, **verdict.view()}

    # runtime API --------------------------------------------------------------------------------------

    async def tool_execute(self, caller: AgentRegistration, call: ToolExecuteRequest) -> ToolExecuteAnswer:
        return await self.steps.execute(caller, call)

    async def tool_result(self, caller: AgentRegistration, report: ToolResultRequest) -> None:
        await self.steps.tool_result(caller, report)

    async def graph_stream(self, caller: AgentRegistration, chunk: GraphStreamChunk) -> None:
        await self.run_reports.graph_stream(caller, chunk)

    async def callback(self, caller: AgentRegistration, report: ExecutorCallback) -> ExecutionRecord:
        return await self.run_reports.callback(caller, report)

    # background work ----------------------------------------------------------------------------------

    async def recover(self) -> None:
        await self.recovery.recover()

    async def watchdog_once(self) -> int:
        return await self.recovery.watchdog_once()

    def authorize_children(self, may_invoke: MayInvoke) -> None:
        """How a child's start is authorized: the client API's own invoke check (servers/oe.py sets it)."""
        self.children.may_invoke = may_invoke

    async def aclose(self) -> None:
        await self.children.aclose()
        await self.runs.aclose()
        await self.notifier.aclose()


__all__ = [
    "APPROVAL_REQUIRED",
    "BadReview",
    "Conflict",
    "NotFound",
    "Orchestrator",
    "Registrations",
    "UnknownAgent",
    "client_view",
    "review_view",
]
