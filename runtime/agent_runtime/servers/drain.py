"""Drain and interrupt/call, the receiver side on the AER and the Tool Pod (DR-01 to DR-14, IC-01 to IC-10).

No HTTP here: `servers/drain_http.py` is the thin route layer. One `WorkRegistry` per process tracks every
piece of work each execution has in flight here (the Tool Pod's calls, the AER's turn and local tool bodies),
keyed by execution and step:

- `admit()` registers a call before anything of it runs, and refuses it once its execution is draining; it
  is synchronous, so no drain can slip between the check and the registration (DR-10, DR-13).
- `run()` runs the call's work as its own task. A cooperative (async) body is cancelled by a drain or an
  interrupt and its caller gets `CallInterrupted`; a sync body in a worker thread has no signal channel, so
  it is never cancelled, never reported abandoned, and tracked until its thread really ends (DR-09, IC-07).
- `drain()` records one drain per execution, idempotent on `request_id` (a retry re-reads the record), cancels
  what can be cancelled and settles `completed` once nothing is left, or `timed_out` at the absolute
  deadline, which no retry moves (DR-04 to DR-06).
- `interrupt()` answers `interrupted`, `not_found`, `already_settled` or `not_cancellable` (IC-03 to IC-07);
  an interrupt for a step not attached yet is kept for a while and fires when the call attaches.

State is process-local by design (DR-11): a restarted runtime has lost its work and answers
`delivery_failed/execution_not_found`. Finished records and the memory of served executions are kept
`RUNNER_DRAIN_RECORD_TTL_S` after the execution went quiet, then forgotten (DR-07, DR-08).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from agent_runtime.contract import (
    DRAIN_MAX_DEADLINE_MS_ENV,
    DRAIN_RECORD_TTL_S_ENV,
    POD_IP_ENV,
)
from agent_runtime.listen import DUAL_STACK_HOST, IPV4_HOST
from agent_runtime.protocol import EXECUTION_NOT_FOUND, DrainOutcome, InterruptOutcome
from agent_runtime.sdk.tracking import CallInterrupted, ExecutionDraining

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_MAX_DEADLINE_MS = 60_000
DEFAULT_RECORD_TTL_S = 900
# How long an interrupt for a call that has not attached yet waits for it (IC-05: the call timeout).
PENDING_INTERRUPT_TTL_S = 30.0
# Forgetting is lazy: at most this often, on the next admission, drain or interrupt.
_SWEEP_INTERVAL_S = 1.0


class DrainSettingsError(ValueError):
    """A drain setting or the pod's identity is malformed; the message names the variable and the fix."""


@dataclass(frozen=True)
class DrainSettings:
    """`RUNNER_DRAIN_MAX_DEADLINE_MS` (60 s) and `RUNNER_DRAIN_RECORD_TTL_S` (900 s, L-06).

    Keep the TTL at or above the OE's 15-minute retry window: a shorter one forgets a record while the OE
    still retries, and its late retries get `execution_not_found` instead of the recorded outcome.
    """

    max_deadline_ms: int = DEFAULT_MAX_DEADLINE_MS
    record_ttl_s: float = DEFAULT_RECORD_TTL_S

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DrainSettings:
        return cls(
            max_deadline_ms=_positive_int(env, DRAIN_MAX_DEADLINE_MS_ENV, DEFAULT_MAX_DEADLINE_MS, "ms"),
            record_ttl_s=float(_positive_int(env, DRAIN_RECORD_TTL_S_ENV, DEFAULT_RECORD_TTL_S, "seconds")),
        )


def _positive_int(env: Mapping[str, str], name: str, default: int, unit: str) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) <= 0:
        raise DrainSettingsError(
            f"{name}={raw!r} is not a positive whole number of {unit}; set it to one (the default is "
            f"{default}) or unset it"
        )
    return int(raw)


@dataclass(frozen=True)
class PodIdentity:
    """Which pod answers (Decision 8): its name (HOSTNAME) and the base URL the OE reaches it at directly."""

    name: str | None = None
    address: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, host: str, port: int) -> PodIdentity:
        """The pod IP the operator renders (`RUNNER_POD_IP`, from the downward API), else the listen host
        (loopback when it listens on every interface: a local run)."""
        raw = env.get(POD_IP_ENV, "").strip()
        if raw:
            try:
                host = str(ipaddress.ip_address(raw))
            except ValueError:
                raise DrainSettingsError(
                    f"{POD_IP_ENV}={raw!r} is not an IP address; render it from the pod's status.podIP "
                    "(downward API) or unset it"
                ) from None
        elif host in ("", IPV4_HOST, DUAL_STACK_HOST):
            host = "127.0.0.1"
        address = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        return cls(name=env.get("HOSTNAME") or None, address=address)


class WorkspaceMissing(Exception):
    """A managed runtime (APP_ID set) got no `workspace_id` (400)."""


class WorkspaceMismatch(Exception):
    """`workspace_id` is not this runtime's APP_ID (403): the token alone does not prove ownership."""


def check_workspace(app_id: str | None, workspace_id: str | None) -> None:
    """Decision 1, DR-03: compared exactly with APP_ID on a managed runtime; not checked without APP_ID."""
    if not app_id:
        return
    if not workspace_id:
        raise WorkspaceMissing
    if workspace_id != app_id:
        raise WorkspaceMismatch


class DeadlineTooFar(Exception):
    """`deadline_at_ms` is further ahead than RUNNER_DRAIN_MAX_DEADLINE_MS allows (DR-06, 400)."""

    def __init__(self, max_ms: int) -> None:
        super().__init__(f"deadline_at_ms is more than {max_ms} ms ahead")
        self.max_ms = max_ms


class RequestIdConflict(Exception):
    """A `request_id` already names the drain of another execution (409): a caller bug, never a retry."""


@dataclass(eq=False)
class Ticket:
    """One tracked piece of work: a call at `step`, or (step None) the AER's turn of the execution."""

    execution_id: str
    step: int | None
    cancellable: bool
    task: asyncio.Task[Any] | None = None
    # Why we stopped it: (category, explanation) of the CallInterrupted its caller gets.
    stopped: tuple[str, str] | None = None
    settled: bool = False

    def interrupted(self) -> CallInterrupted:
        assert self.stopped is not None
        return CallInterrupted(*self.stopped)


@dataclass(eq=False)
class _Drain:
    execution_id: str
    reason: str
    deadline_at_ms: int
    outcome: DrainOutcome = "accepted"
    reason_code: str | None = None
    settler: asyncio.Task[None] | None = None


_NO_TICKETS: frozenset[Ticket] = frozenset()


@dataclass(eq=False, slots=True)
class _Execution:
    """What is known of one execution here. A served execution is remembered RUNNER_DRAIN_RECORD_TTL_S
    after it went quiet, and a Tool Pod serves thousands a minute: so a quiet one holds no empty containers
    (a tuple of settled steps, shared empties) and about 300 bytes, not the 930 of four empty sets and a
    dict (the soak's Tool Pod grew 12% over 15 minutes remembering them)."""

    execution_id: str
    tickets: set[Ticket] | frozenset[Ticket] = _NO_TICKETS  # a set of its own while work is in flight
    settled_steps: tuple[int, ...] = ()
    max_settled: int = 0
    pending: dict[int, float] | None = None  # step -> when the kept interrupt expires
    drain: _Drain | None = None
    request_ids: tuple[str, ...] = ()
    idle: asyncio.Event | None = None  # set when the last ticket settles, while a drain waits

    def live_tickets(self) -> set[Ticket]:
        if not isinstance(self.tickets, set):
            self.tickets = set()
        return self.tickets


DrainResult = tuple[DrainOutcome, str | None]


class WorkRegistry:
    """The work this process tracks per execution, and the drain and interrupt records over it.

    `bounded_by_life`: an interrupt for a call not attached yet is kept only while the execution has work
    here (the AER, whose turn is the execution's life); the Tool Pod, which sees calls one at a time, keeps it
    for any execution it remembers.
    """

    def __init__(
        self,
        *,
        settings: DrainSettings | None = None,
        bounded_by_life: bool = False,
        pending_interrupt_ttl_s: float = PENDING_INTERRUPT_TTL_S,
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.settings = settings or DrainSettings()
        self._bounded_by_life = bounded_by_life
        self._pending_ttl_s = pending_interrupt_ttl_s
        self._clock = clock
        self._wall_ms = wall_ms
        self._executions: dict[str, _Execution] = {}
        self._by_request: dict[str, _Drain] = {}
        # Executions with nothing in flight, oldest quiet first: the order they are forgotten in.
        self._quiet: OrderedDict[str, float] = OrderedDict()
        self._next_sweep = 0.0

    # admission and tracking ---------------------------------------------------------------------------

    def admit(self, execution_id: str, step: int | None, *, cancellable: bool) -> Ticket:
        """Register a call before it runs; ExecutionDraining once a drain of its execution was accepted."""
        now = self._clock()
        self._sweep(now)
        execution = self._executions.get(execution_id)
        if execution is None:
            execution = self._executions[execution_id] = _Execution(execution_id)
        elif execution.drain is not None:
            raise ExecutionDraining(execution_id)
        self._quiet.pop(execution_id, None)
        ticket = Ticket(execution_id=execution_id, step=step, cancellable=cancellable)
        execution.live_tickets().add(ticket)
        if step is not None and execution.pending:
            expires = execution.pending.pop(step, None)
            if expires is not None and expires > now:
                ticket.stopped = _interrupt(execution_id, step)
        return ticket

    async def run(self, ticket: Ticket, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` as the ticket's task and return its result; CallInterrupted when we stopped it.

        A ticket stopped before it started (an interrupt waiting for it, a drain) runs nothing at all.
        """
        if ticket.stopped is not None:
            work.close()
            self.settle(ticket)
            raise ticket.interrupted()
        task = asyncio.get_running_loop().create_task(work)
        self.attach(ticket, task)
        try:
            # A sync body's task is shielded: cancelling the caller (a timeout, the turn's own drain) must
            # not make its thread look finished while it still runs.
            return await (task if ticket.cancellable else asyncio.shield(task))
        except asyncio.CancelledError:
            current = asyncio.current_task()
            ours = ticket.stopped is not None and task.cancelled()
            if ours and (current is None or current.cancelling() == 0):
                raise ticket.interrupted() from None
            raise

    def attach(self, ticket: Ticket, task: asyncio.Task[Any]) -> None:
        """Make `task` the ticket's work; the ticket settles when the task ends, whoever awaits it."""
        ticket.task = task
        task.add_done_callback(lambda _: self.settle(ticket))
        if ticket.stopped is not None and ticket.cancellable:
            task.cancel()

    def settle(self, ticket: Ticket) -> None:
        """The ticket's work is over (idempotent)."""
        if ticket.settled:
            return
        ticket.settled = True
        execution = self._executions.get(ticket.execution_id)
        if execution is None:
            return
        execution.live_tickets().discard(ticket)
        if ticket.step is not None:
            if ticket.step not in execution.settled_steps:
                execution.settled_steps += (ticket.step,)
            execution.max_settled = max(execution.max_settled, ticket.step)
        if not execution.tickets:
            self._mark_quiet(execution, self._clock())

    def draining(self, execution_id: str) -> str | None:
        """The reason of the drain accepted for this execution, if one was."""
        execution = self._executions.get(execution_id)
        if execution is None or execution.drain is None:
            return None
        return execution.drain.reason or "drained"

    def in_flight(self, execution_id: str) -> int:
        """How many tracked pieces of work of this execution have not settled."""
        execution = self._executions.get(execution_id)
        return 0 if execution is None else len(execution.tickets)

    # drain --------------------------------------------------------------------------------------------

    def drain(self, *, request_id: str, execution_id: str, reason: str, deadline_at_ms: int) -> DrainResult:
        """Start (or re-read) the one drain of an execution; the outcome is `accepted` while it settles."""
        now = self._clock()
        self._sweep(now)
        known = self._by_request.get(request_id)
        if known is not None:
            if known.execution_id != execution_id:
                raise RequestIdConflict(request_id)
            logger.debug("drain %s of execution %s re-read: %s", request_id, execution_id, known.outcome)
            return known.outcome, known.reason_code
        execution = self._executions.get(execution_id)
        if execution is not None and execution.drain is not None:
            # One drain per execution: another request_id gets the record there is, never a second drain.
            self._index(execution, execution.drain, request_id)
            return execution.drain.outcome, execution.drain.reason_code
        max_ms = self.settings.max_deadline_ms
        remaining_ms = deadline_at_ms - self._wall_ms()
        if remaining_ms > max_ms:
            raise DeadlineTooFar(max_ms)
        record = _Drain(execution_id=execution_id, reason=reason, deadline_at_ms=deadline_at_ms)
        if execution is None:
            # Never served here, or forgotten. Recorded all the same: a retry re-reads it, and a call of it
            # arriving late is refused (the caller is cancelling it).
            execution = self._executions[execution_id] = _Execution(execution_id)
            record.outcome, record.reason_code = "delivery_failed", EXECUTION_NOT_FOUND
            self._index(execution, record, request_id)
            self._mark_quiet(execution, now)
            logger.info("drain %s: execution %s is not known here", request_id, execution_id)
            return record.outcome, record.reason_code
        self._index(execution, record, request_id)
        execution.pending = None
        for ticket in list(execution.tickets):
            self._stop(ticket, _drained(execution_id, reason))
        logger.info(
            "drain %s of execution %s accepted (%s): %d piece(s) of work in flight, deadline in %d ms",
            request_id,
            execution_id,
            reason or "no reason given",
            len(execution.tickets),
            remaining_ms,
        )
        if not execution.tickets:
            self._finish(record, "completed")
            return record.outcome, record.reason_code
        if remaining_ms <= 0:
            # The deadline had passed with work in flight: that is a timed_out, whatever settles next.
            self._finish(record, "timed_out")
            return record.outcome, record.reason_code
        # The waiter exists before the emptiness can change: every later settle sees it (DR-13).
        execution.idle = asyncio.Event()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + remaining_ms / 1000
        record.settler = loop.create_task(self._settle(execution, record, deadline))
        return record.outcome, record.reason_code

    async def _settle(self, execution: _Execution, record: _Drain, deadline: float) -> None:
        assert execution.idle is not None
        try:
            async with asyncio.timeout_at(deadline):
                await execution.idle.wait()
        except TimeoutError:
            self._finish(record, "timed_out")
        else:
            self._finish(record, "completed")

    def _finish(self, record: _Drain, outcome: DrainOutcome) -> None:
        record.outcome = outcome
        record.settler = None
        execution = self._executions.get(record.execution_id)
        left = 0 if execution is None else len(execution.tickets)
        logger.info("drain of execution %s %s (%d still running)", record.execution_id, outcome, left)
        if execution is not None and not execution.tickets:
            self._mark_quiet(execution, self._clock())

    def _index(self, execution: _Execution, record: _Drain, request_id: str) -> None:
        execution.drain = execution.drain or record
        if request_id not in execution.request_ids:
            execution.request_ids += (request_id,)
        self._by_request[request_id] = record

    # interrupt ----------------------------------------------------------------------------------------

    def interrupt(self, execution_id: str, step: int) -> InterruptOutcome:
        """Stop exactly the call at `step`; the execution stays open and later calls proceed (IC-08)."""
        now = self._clock()
        self._sweep(now)
        execution = self._executions.get(execution_id)
        if execution is None:
            return "not_found"
        running = [ticket for ticket in execution.tickets if ticket.step == step]
        if running:
            outcomes = {self._stop(ticket, _interrupt(execution_id, step)) for ticket in running}
            for outcome in ("interrupted", "not_cancellable", "already_settled"):
                if outcome in outcomes:
                    logger.info("interrupt of execution %s step %d: %s", execution_id, step, outcome)
                    return outcome  # type: ignore[return-value]
        if step in execution.settled_steps:
            return "already_settled"
        alive = bool(execution.tickets) or not self._bounded_by_life
        if execution.drain is None and alive and step > execution.max_settled:
            # Not attached yet: kept, and fired the moment the call attaches (IC-04, A-07).
            execution.pending = execution.pending or {}
            execution.pending[step] = now + self._pending_ttl_s
            logger.info("interrupt of execution %s step %d kept until the call attaches", execution_id, step)
            return "interrupted"
        return "not_found"

    @staticmethod
    def _stop(ticket: Ticket, why: tuple[str, str]) -> InterruptOutcome:
        """Signal one ticket; what it says is honest about work that has no signal channel."""
        task = ticket.task
        if task is None:
            # Admitted, not started: nothing has run, so it never will.
            ticket.stopped = ticket.stopped or why
            return "interrupted"
        if task.done():
            return "already_settled"
        if not ticket.cancellable:
            return "not_cancellable"
        ticket.stopped = ticket.stopped or why
        task.cancel()
        return "interrupted"

    # forgetting ---------------------------------------------------------------------------------------

    def _mark_quiet(self, execution: _Execution, now: float) -> None:
        if execution.idle is not None:
            execution.idle.set()
        if not execution.tickets:
            execution.tickets = _NO_TICKETS
        self._quiet[execution.execution_id] = now
        self._quiet.move_to_end(execution.execution_id)

    def _sweep(self, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + _SWEEP_INTERVAL_S
        ttl = self.settings.record_ttl_s
        while self._quiet:
            execution_id, since = next(iter(self._quiet.items()))
            if now - since < ttl:
                return
            del self._quiet[execution_id]
            execution = self._executions.get(execution_id)
            if execution is None or execution.tickets:
                continue
            if execution.drain is not None and execution.drain.settler is not None:
                continue  # still settling: kept until it has finished and then sat out the TTL
            del self._executions[execution_id]
            for request_id in execution.request_ids:
                self._by_request.pop(request_id, None)

    def __len__(self) -> int:
        """How many executions this process remembers."""
        return len(self._executions)


def _interrupt(execution_id: str, step: int) -> tuple[str, str]:
    exc = CallInterrupted.by_interrupt(execution_id, step)
    return exc.category, exc.explanation


def _drained(execution_id: str, reason: str) -> tuple[str, str]:
    exc = CallInterrupted.by_drain(execution_id, reason)
    return exc.category, exc.explanation
