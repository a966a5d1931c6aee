"""The OE's side of drain and interrupt/call (OE-17, OE-18): durable records, delivered until answered.

A client's cancel becomes a drain record in the store (one per execution); an interrupt of one call becomes
an interrupt record (one per call). A background loop (`DrainCaller.run`, which every OE replica runs) sends
each record's request to every runtime that served the execution, directly to the pod that answered
(Decision 8: each answer names its pod and address), and keeps at it:

- the same `request_id` and the same absolute `deadline_at_ms` on every retry, whoever sends it;
- `202 accepted` means "ask again soon"; only `200 completed` makes a runtime quiet. `timed_out` and
  `delivery_failed` are final answers too, but the drain then ends `unconfirmed`, never `quiet`;
- a refused connection, a 5xx, a 401 or a deadline the runtime finds too far (clock skew: it comes closer
  as time passes) is retried with backoff, for `OE_DRAIN_RETRY_WINDOW_S` (15 minutes) from the cancel;
- a runtime that answers for the execution later (a call that was in flight on a pod nobody knew yet)
  joins the record, which opens again; so does waiting while this OE still has calls of it in flight;
- everything is in the store, so an OE that restarts carries on where the last one stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import aiohttp

from agent_runtime.oe.leases import Leases, LocalLeases, delivery_key
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.runtime_auth import authorized
from agent_runtime.oe.settings import SettingsError
from agent_runtime.oe.store.base import AuditRecord, ExecutionRecord, Store
from agent_runtime.oe.store.deliveries import (
    DeliveryRecord,
    DeliveryTarget,
    ServedRuntime,
    drain_key,
    interrupt_key,
)
from agent_runtime.oe.store.unavailable import StoreUnavailable
from agent_runtime.protocol import (
    DRAIN_PATH,
    INTERRUPT_CALL_PATH,
    DrainRequest,
    ExecutionState,
    InterruptCallRequest,
)

logger = logging.getLogger(__name__)

DRAIN_DEADLINE_ENV = "OE_DRAIN_DEADLINE_S"
RETRY_WINDOW_ENV = "OE_DRAIN_RETRY_WINDOW_S"

# Below the runtimes' default RUNNER_DRAIN_MAX_DEADLINE_MS (60 s), with room for clock skew.
DEFAULT_DEADLINE_S = 30.0
DEFAULT_RETRY_WINDOW_S = 900.0  # "OE reintenta un drenaje durante 15 minutos"
MAX_DEADLINE_S = 60.0

# Backoff: polling an accepted drain is cheap (the runtime re-reads a record); a failing runtime is not.
_POLL_FIRST_S, _POLL_MAX_S = 0.05, 2.0
_RETRY_FIRST_S, _RETRY_MAX_S = 0.5, 30.0
_BUSY_RECHECK_S = 0.5
_IDLE_WAKE_S = 1.0
_PARALLEL_RECORDS = 32
_NOTED_CACHE = 50_000
_RECOVERY_SCAN = 5_000

# A pod address as the runtimes report it: scheme, host (name, IPv4 or [IPv6]) and port, nothing else.
_ADDRESS = re.compile(r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$")

_DRAIN_FINAL = frozenset({"completed", "timed_out", "delivery_failed"})
_INTERRUPT_FINAL = frozenset({"interrupted", "not_found", "already_settled", "not_cancellable"})
# The one outcome an interrupt record ends with when several runtimes answered.
_INTERRUPT_PRIORITY = ("interrupted", "not_cancellable", "already_settled", "not_found")


@dataclass(frozen=True)
class DrainCallerSettings:
    """`OE_DRAIN_DEADLINE_S` (how far ahead each drain's absolute deadline is set, at most 60 s) and
    `OE_DRAIN_RETRY_WINDOW_S` (how long a record is retried)."""

    deadline_s: float = DEFAULT_DEADLINE_S
    retry_window_s: float = DEFAULT_RETRY_WINDOW_S
    request_timeout_s: float = 10.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DrainCallerSettings:
        deadline = _seconds(env, DRAIN_DEADLINE_ENV, DEFAULT_DEADLINE_S)
        if deadline > MAX_DEADLINE_S:
            raise SettingsError(
                f"{DRAIN_DEADLINE_ENV}={deadline:g} is beyond {MAX_DEADLINE_S:g} s, which runtimes refuse "
                "(RUNNER_DRAIN_MAX_DEADLINE_MS); set it lower"
            )
        return cls(
            deadline_s=deadline, retry_window_s=_seconds(env, RETRY_WINDOW_ENV, DEFAULT_RETRY_WINDOW_S)
        )


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise SettingsError(f"{name}={raw!r} is not a positive number of seconds; set one or unset it")
    return value


class Registrations(Protocol):
    def get(self, agent: str) -> AgentRegistration | None: ...


class Events(Protocol):
    async def publish(
        self, execution_id: str, *, type: str, step: int | None = None, data: dict[str, Any] | None = None
    ) -> Any: ...


@dataclass(frozen=True)
class Answer:
    """What one attempt got: an HTTP status and JSON body, or a transport problem (no status)."""

    status: int | None = None
    body: dict[str, Any] | None = None
    problem: str | None = None


def valid_address(address: str | None) -> bool:
    """A base URL a runtime may report for itself; anything else (a path, credentials) is not used."""
    return bool(address) and _ADDRESS.fullmatch(address or "") is not None


def apply_answer(kind: str, target: DeliveryTarget, answer: Answer, *, now: float) -> DeliveryTarget:
    """The target after one attempt: final on a contract outcome, else scheduled again with backoff."""
    target = target.model_copy()
    target.attempts += 1
    body = answer.body or {}
    outcome = body.get("outcome") if isinstance(body.get("outcome"), str) else None
    finals = _DRAIN_FINAL if kind == "drain" else _INTERRUPT_FINAL
    if answer.status == 200 and outcome in finals:
        target.outcome, target.final, target.problem = outcome, True, None
        reason_code = body.get("reason_code")
        target.reason_code = reason_code if isinstance(reason_code, str) else None
        return target
    if kind == "drain" and answer.status == 202 and outcome == "accepted":
        target.outcome, target.problem = "accepted", None
        target.delay_s = _POLL_FIRST_S if target.delay_s <= 0 else min(target.delay_s * 2, _POLL_MAX_S)
        target.next_at = now + target.delay_s
        return target
    if answer.status is None:
        target.problem = answer.problem or "unreachable"
    elif answer.status == 400 and body.get("error") == "deadline_too_far":
        # The runtime's clock runs behind ours: the fixed deadline comes within its limit as time passes.
        target.problem = "deadline_too_far"
    else:
        error = body.get("error") if isinstance(body.get("error"), str) else None
        target.problem = f"HTTP {answer.status}" + (f" {error}" if error else "")
    target.delay_s = (
        _RETRY_FIRST_S if target.delay_s < _RETRY_FIRST_S else min(target.delay_s * 2, _RETRY_MAX_S)
    )
    target.next_at = now + target.delay_s
    return target


def settle(record: DeliveryRecord, *, now: float, busy: bool) -> DeliveryRecord:
    """The record's state once its targets' answers are in: open, or how it ended."""
    record = record.model_copy()
    if now >= record.retry_until:
        record.targets = [
            target if target.final else target.model_copy(update={"final": True, "outcome": "expired"})
            for target in record.targets
        ]
    waiting = [target for target in record.targets if not target.final]
    if waiting or (busy and record.kind == "drain" and now < record.retry_until):
        record.state = "open"
        record.due = min([target.next_at for target in waiting] or [now + _BUSY_RECHECK_S])
        return record
    outcomes = [target.outcome for target in record.targets]
    if record.kind == "drain":
        quiet = all(outcome == "completed" for outcome in outcomes)
        record.state = "quiet" if quiet else "unconfirmed"
        record.outcome = "completed" if quiet else _worst(outcomes)
    else:
        found = next((o for o in _INTERRUPT_PRIORITY if o in outcomes), None)
        record.state = "done" if found is not None else "unconfirmed"
        record.outcome = found or "expired"
    record.due = now
    return record


def _worst(outcomes: list[str | None]) -> str:
    for outcome in ("expired", "delivery_failed", "timed_out"):
        if outcome in outcomes:
            return outcome
    return "unconfirmed"


class DrainCaller:
    """Creates drain and interrupt records and delivers them; one per OE process, every replica runs one."""

    def __init__(
        self,
        *,
        store: Store,
        registry: Registrations,
        events: Events | None = None,
        settings: DrainCallerSettings | None = None,
        clock: Callable[[], float] = time.time,
        busy: Callable[[str], bool] = lambda _: False,
        leases: Leases | None = None,
    ) -> None:
        self.store = store
        self._leases = leases or LocalLeases()
        self.registry = registry
        self.events = events
        self.settings = settings or DrainCallerSettings()
        self._clock = clock
        self._busy = busy
        self._wake: asyncio.Event | None = None
        self._session: aiohttp.ClientSession | None = None
        # (execution, component, address) already stored: a call's answer costs no write after the first.
        self._noted: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    # recording ----------------------------------------------------------------------------------------

    async def served(
        self,
        execution_id: str,
        component: Literal["aer", "tool"],
        *,
        pod_name: str | None,
        address: str | None,
        fallback: str,
    ) -> None:
        """Note that a runtime answered for the execution; a drain that already ended opens again for it."""
        if not valid_address(address):
            address = fallback  # an answer without its pod's address: the Service is all we know
        assert address is not None
        key = (execution_id, component, address)
        if key in self._noted:
            return
        runtime = ServedRuntime(
            execution_id=execution_id,
            component=component,
            address=address,
            pod_name=pod_name,
            at=self._clock(),
        )
        if await self.store.note_runtime(runtime):
            await self._reopen(execution_id)
        self._noted[key] = None
        if len(self._noted) > _NOTED_CACHE:
            self._noted.popitem(last=False)

    async def _reopen(self, execution_id: str) -> None:
        for _ in range(5):
            record = await self.store.get_delivery(drain_key(execution_id))
            if record is None or record.open:
                return
            now = self._clock()
            reopened = record.model_copy(
                update={
                    "state": "open",
                    "outcome": None,
                    "due": now,
                    "retry_until": max(record.retry_until, now),
                }
            )
            if await self.store.replace_delivery(reopened) is not None:
                logger.info(
                    "drain of execution %s opens again: a runtime answered for it since", execution_id
                )
                self.kick()
                return

    async def drain(self, execution: ExecutionRecord, *, reason: str) -> DeliveryRecord:
        """The execution's one drain record: created now (to every runtime that served it), or the one
        there is."""
        now = self._clock()
        record = DeliveryRecord(
            key=drain_key(execution.execution_id),
            kind="drain",
            execution_id=execution.execution_id,
            agent=execution.agent,
            workspace_id=execution.workspace_id,
            request_id=uuid.uuid4().hex,
            reason=reason,
            # Absolute and fixed for the record's life: no retry ever moves it (DR-06).
            deadline_at_ms=int((now + self.settings.deadline_s) * 1000),
            targets=await self._targets(execution.execution_id, []),
            created_at=now,
            retry_until=now + self.settings.retry_window_s,
            due=now,
            updated_at=now,
        )
        existing = await self.store.create_delivery(record)
        if existing is not None:
            return existing
        logger.info(
            "drain %s of execution %s recorded for %d runtime(s)",
            record.request_id,
            record.execution_id,
            len(record.targets),
        )
        self.kick()
        return record

    async def interrupt(
        self,
        execution: ExecutionRecord,
        step: int,
        *,
        reg: AgentRegistration,
        component: Literal["aer", "tool"] | None = None,
    ) -> DeliveryRecord:
        """The call's one interrupt record, to the runtimes of `component` (the AER runs local tools, the
        Tool Pod the others and model calls; both when the step is not known yet) that served the
        execution, or, when none has answered yet, to that component's Service."""
        now = self._clock()
        targets = await self._targets(execution.execution_id, [], component=component)
        if not targets:
            targets = [
                DeliveryTarget(component=kind, address=reg.aer_url if kind == "aer" else reg.tool_url)
                for kind in ("aer", "tool")
                if component in (None, kind)
            ]
        record = DeliveryRecord(
            key=interrupt_key(execution.execution_id, step),
            kind="interrupt",
            execution_id=execution.execution_id,
            agent=execution.agent,
            workspace_id=execution.workspace_id,
            step=step,
            component=component,
            request_id=uuid.uuid4().hex,
            targets=targets,
            created_at=now,
            retry_until=now + self.settings.retry_window_s,
            due=now,
            updated_at=now,
        )
        existing = await self.store.create_delivery(record)
        if existing is not None:
            return existing
        self.kick()
        return record

    async def _targets(
        self, execution_id: str, known: list[DeliveryTarget], *, component: str | None = None
    ) -> list[DeliveryTarget]:
        """`known` plus every runtime (of `component`, if given) noted for the execution since."""
        targets = list(known)
        addresses = {(target.component, target.address) for target in targets}
        for runtime in await self.store.list_runtimes(execution_id):
            if component is not None and runtime.component != component:
                continue
            if (runtime.component, runtime.address) not in addresses:
                addresses.add((runtime.component, runtime.address))
                targets.append(
                    DeliveryTarget(
                        component=runtime.component, address=runtime.address, pod_name=runtime.pod_name
                    )
                )
        return targets

    # delivering ---------------------------------------------------------------------------------------

    def kick(self) -> None:
        """Deliver now rather than at the next tick."""
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """The background loop: deliver what is due, forever (OE restarts included: it is all stored)."""
        self._wake = asyncio.Event()
        try:
            await self.recover()
            while True:
                wait_s = await self.run_once()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_s):
                        await self._wake.wait()
        finally:
            await self.aclose()

    async def run_once(self) -> float:
        """Deliver every record that is due; returns how long until the next one is."""
        now = self._clock()
        due = await self.store.list_deliveries(due_by=now, limit=200)
        # Each record is delivered by the replica holding its lease; the others leave it alone.
        due = [record for record in due if await self._leases.acquire(delivery_key(record.key), now=now)]
        gate = asyncio.Semaphore(_PARALLEL_RECORDS)

        async def one(record: DeliveryRecord) -> None:
            async with gate:
                try:
                    await self.deliver(record)
                except StoreUnavailable:
                    pass  # the store logged its outage once; the record stays due for the next round
                except Exception as exc:  # one record's trouble must not stop the others
                    logger.error("delivering %s failed: %s", record.key, type(exc).__name__, exc_info=exc)

        await asyncio.gather(*(one(record) for record in due))
        soonest = await self.store.list_deliveries(limit=1)
        if not soonest:
            return _IDLE_WAKE_S
        return max(0.01, min(_IDLE_WAKE_S, soonest[0].due - self._clock()))

    async def deliver(self, record: DeliveryRecord) -> DeliveryRecord:
        """One round of one record: send to each target that is due, store what came back."""
        now = self._clock()
        targets = await self._targets(record.execution_id, record.targets, component=record.component)
        reg = self.registry.get(record.agent)
        sends = [index for index, target in enumerate(targets) if not target.final and target.next_at <= now]
        if reg is None:
            answers = [Answer(problem=f"Agent {record.agent!r} is not registered") for _ in sends]
        else:
            answers = await asyncio.gather(*(self._send(record, targets[i], reg) for i in sends))
        done = self._clock()
        for index, answer in zip(sends, answers, strict=True):
            targets[index] = apply_answer(record.kind, targets[index], answer, now=done)
        updated = settle(
            record.model_copy(update={"targets": targets, "updated_at": done}),
            now=done,
            busy=self._busy(record.execution_id),
        )
        stored = await self.store.replace_delivery(updated)
        if stored is None:
            return record  # another replica stored its round first; the next round reads it
        if not stored.open and record.open:
            await self._ended(stored)
        return stored

    async def _send(self, record: DeliveryRecord, target: DeliveryTarget, reg: AgentRegistration) -> Answer:
        body: DrainRequest | InterruptCallRequest
        if record.kind == "drain":
            assert record.deadline_at_ms is not None
            body = DrainRequest(
                request_id=record.request_id,
                execution_id=record.execution_id,
                reason=record.reason,
                deadline_at_ms=record.deadline_at_ms,
                workspace_id=record.workspace_id,
            )
            path = DRAIN_PATH
        else:
            assert record.step is not None
            body = InterruptCallRequest(
                execution_id=record.execution_id,
                step_number=record.step,
                workspace_id=record.workspace_id,
                request_id=record.request_id,
            )
            path = INTERRUPT_CALL_PATH
        timeout = aiohttp.ClientTimeout(total=self.settings.request_timeout_s)
        data = body.model_dump_json().encode()
        try:
            async with authorized(
                self._pool(),
                "POST",
                target.address + path,
                reg=reg,
                audience=target.component,
                execution_id=record.execution_id,
                data=data,
                timeout=timeout,
            ) as response:
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            return Answer(problem=type(exc).__name__)  # never the error text: it may quote the request
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        return Answer(status=status, body=parsed if isinstance(parsed, dict) else None)

    async def _ended(self, record: DeliveryRecord) -> None:
        summary = ", ".join(f"{t.component} {t.pod_name or t.address}: {t.outcome}" for t in record.targets)
        logger.info(
            "%s of execution %s ended %s (%s)", record.kind, record.execution_id, record.state, summary
        )
        await self.store.append_audit(
            AuditRecord(
                execution_id=record.execution_id,
                step=record.step,
                agent=record.agent,
                workspace_id=record.workspace_id,
                kind=record.kind,
                decision=record.state,
                reason=summary or "no runtime had served it",
                status=record.outcome,
                at=self._clock(),
            )
        )
        if self.events is not None:
            await self.events.publish(
                record.execution_id,
                type="drained" if record.kind == "drain" else "interrupted",
                step=record.step,
                data={"state": record.state, "outcome": record.outcome},
            )

    async def recover(self) -> None:
        """After a start: a cancel whose drain record was never written (the OE died between the two
        writes) gets one now. Records already written need nothing: the loop reads them from the store."""
        now = self._clock()
        cursor: str | None = None
        scanned = 0
        while scanned < _RECOVERY_SCAN:
            page = await self.store.list_executions(status=ExecutionState.CANCELLED, limit=200, cursor=cursor)
            for execution in page.items:
                scanned += 1
                finished = execution.finished_at or execution.updated_at
                if now - finished > self.settings.retry_window_s:
                    continue
                if await self.store.get_delivery(drain_key(execution.execution_id)) is None:
                    await self.drain(execution, reason="cancelled (recovered after an OE restart)")
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def _pool(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=64),
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def delivery_view(record: DeliveryRecord) -> dict[str, Any]:
    """A drain or interrupt record as clients see it."""

    def iso(ts: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}Z"

    view: dict[str, Any] = {
        "kind": record.kind,
        "execution_id": record.execution_id,
        "request_id": record.request_id,
        "state": record.state,
        "outcome": record.outcome,
        "created_at": iso(record.created_at),
        "retry_until": iso(record.retry_until),
        "targets": [
            target.model_dump(
                include={"component", "address", "pod_name", "outcome", "reason_code", "attempts"}
            )
            | ({"problem": target.problem} if target.problem else {})
            for target in record.targets
        ],
    }
    if record.kind == "drain":
        view["reason"] = record.reason
        view["deadline_at_ms"] = record.deadline_at_ms
    else:
        view["step"] = record.step
    return view
