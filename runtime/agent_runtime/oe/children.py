"""Another Agent of the cluster called by reference (issue 38, `spec.agentRefs`): the OE runs the call as
a child execution of that Agent, governed in its own right (its policy, audit, holds), and answers the
parent's step with the child's result.

- Once per (parent execution, step): the child's id is claimed under `child_plan.claim_key` (a one-time
  claim, a unique key in every store) before the child is created, so a call sent again (the parent's AER
  restarted, its OE restarted, another replica took it) attaches to the same child instead of starting
  another.
- As the parent's user: the child's `user_id`, `org_id` and `invoked_by` are the parent's, and the
  parent's invoker must be allowed `create agents/invoke` on the child's Agent, asked as `/invoke` asks
  (`may_invoke`, which the HTTP layer sets from its `ClientAuth`; unset, nothing may start a child). The
  target comes from the parent's registration alone: nothing the AER or a tool sends names it.
- Linked: the child's record holds `parent` (set only here), its audit starts with a `parent` record,
  and the parent's step audit names the child.
- Waited on until the child settles (`child_plan.SETTLED`): its result or error answers the step; a child
  held for a human holds the parent too (kind `child`), and only the child's end (or its next hold) lifts
  that, as the system: `ended` right away, the watchdog's `sweep` after a crash in between.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from agent_runtime.oe.child_plan import (
    CHILD_DECIDER,
    DEFAULT_WAIT_S,
    PARENT_DECIDER,
    SETTLED,
    child_input,
    claim_key,
    error,
    lifts,
    link,
    orphaned,
    refusal,
    settled_outcome,
    step_detail,
    waited_child,
)
from agent_runtime.oe.context import EngineContext
from agent_runtime.oe.errors import BadReview, Conflict, NotFound, UnknownAgent
from agent_runtime.oe.executions import Executions
from agent_runtime.oe.limiter import LimitReached
from agent_runtime.oe.recorder import Recorder
from agent_runtime.oe.store.base import ExecutionRecord, Identity
from agent_runtime.protocol import CallOutcome, ExecutionState, InvokeRequest, ReviewDecision

logger = logging.getLogger(__name__)

S = ExecutionState

# Whether this identity may invoke that Agent (`<namespace>/<name>`): the client API's own check.
MayInvoke = Callable[[Identity | None, str], Awaitable[bool]]


async def nobody_may(identity: Identity | None, agent: str) -> bool:
    return False


class Resume(Protocol):
    def __call__(
        self, execution_id: str, review: ReviewDecision, *, decided_by: Identity, by_child: bool
    ) -> Awaitable[ExecutionRecord]: ...


# Cancel an execution as the system (the Cancellation part's, bound late).
Cancel = Callable[[str, Identity], Awaitable[ExecutionRecord]]


class Children:
    def __init__(
        self,
        ctx: EngineContext,
        *,
        executions: Executions,
        recorder: Recorder,
        resume: Resume,
        cancel: Cancel,
        wait_s: float = DEFAULT_WAIT_S,
    ) -> None:
        self.ctx = ctx
        self.executions = executions
        self.recorder = recorder
        self.resume = resume
        self.cancel = cancel
        self.wait_s = wait_s
        self.may_invoke: MayInvoke = nobody_may
        self._tasks: set[asyncio.Task[None]] = set()

    # the call -----------------------------------------------------------------------------------------

    async def call(
        self, parent: ExecutionRecord, *, step: int, target: str, args: dict[str, Any]
    ) -> tuple[CallOutcome, dict[str, Any] | None]:
        """The step's outcome, and the audit detail naming the child (None when none was started)."""
        store = self.ctx.store
        key = claim_key(parent.execution_id, step)
        fresh = uuid.uuid4().hex
        taken = await store.claim_once(key, {"execution_id": fresh, "agent": target})
        child_id = str(taken["execution_id"]) if taken is not None else fresh
        child = await store.get_execution(child_id)
        if child is None:  # a new claim, or one whose child was never created (refused, or its OE died)
            started = await self._start(parent, step=step, target=target, args=args, child_id=child_id)
            if isinstance(started, CallOutcome):
                return started, None
            child = started
        child = await self._settled(child, parent_id=parent.execution_id)
        target_reg = self.ctx.registry.get(child.agent)
        known = tuple(self.ctx.secrets.known())
        secrets = self.ctx.secrets.all(target_reg) if target_reg is not None else known
        outcome = settled_outcome(child, call_args=args, secrets=secrets)
        return outcome, step_detail(child.execution_id, child.agent, child.status.value)

    async def _start(
        self, parent: ExecutionRecord, *, step: int, target: str, args: dict[str, Any], child_id: str
    ) -> ExecutionRecord | CallOutcome:
        """Create the child under its claimed id, once it may start; a refusal is the step's tool error
        (the claim stays: the same step asked again is refused again, or starts once allowed)."""
        known = self.ctx.registry.get(target) is not None
        allowed = known and await self.may_invoke(parent.invoked_by, target)
        refused = refusal(parent, target=target, known=known, allowed=allowed)
        if refused is not None:
            return refused
        request = InvokeRequest(
            agent=target, input=child_input(args), user_id=parent.user_id, org_id=parent.org_id
        )
        parent_link = link(parent, step)
        try:
            child = await self.executions.invoke(
                request, invoked_by=parent.invoked_by, execution_id=child_id, parent=parent_link
            )
        except KeyError:
            # Another replica (or an earlier attempt) created it between our read and our insert.
            existing = await self.ctx.store.get_execution(child_id)
            if existing is None:
                raise
            return existing
        except LimitReached as exc:
            return error(exc.refusal.category, exc.refusal.message)
        except UnknownAgent as exc:
            return error("agent_ref_unknown", str(exc))
        await self.recorder.audit(
            child,
            kind="parent",
            decision="child_of",
            status="accepted",
            decided_by=parent.invoked_by,
            detail=parent_link.model_dump(),
        )
        return child

    async def _settled(self, child: ExecutionRecord, *, parent_id: str) -> ExecutionRecord:
        """The child once it settles, or as it is when the wait ends; woken by its events in this process,
        read from the store (another replica's runs) at least every half second. A parent cancelled
        meanwhile cancels the child (nobody waits on its answer any more)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        subscription = self.ctx.events.subscribers.open(child.execution_id)
        try:
            while True:
                subscription.events.clear()
                subscription.lagging = False
                current = await self.ctx.store.get_execution(child.execution_id)
                if current is None:
                    raise NotFound(f"child execution {child.execution_id!r} disappeared")
                remaining = deadline - loop.time()
                if current.status in SETTLED or remaining <= 0:
                    return current
                if orphaned(await self.ctx.store.get_execution(parent_id), current):
                    await self._cancel_orphan(parent_id, current.execution_id)
                    continue
                await subscription.wait(min(0.5, remaining))
        finally:
            self.ctx.events.subscribers.close(subscription)

    # lifting a parent's hold --------------------------------------------------------------------------

    def ended(self, record: ExecutionRecord) -> None:
        """An execution ended or suspended: lift the hold it settles (a child's parent, or a parent that
        suspended on a child that has already moved on), or cancel the children of a cancelled parent
        (found by the store's parent index, so also those no OE waits on any more), in the background."""
        if record.parent is not None:
            self._spawn(self._lift(record.parent.execution_id, record.execution_id))
        child_id = waited_child(record.suspension)
        if child_id is not None and record.status is S.SUSPENDED:
            self._spawn(self._lift(record.execution_id, child_id))
        if record.status is S.CANCELLED:
            self._spawn(self._cancel_children(record.execution_id))

    async def _cancel_children(self, parent_id: str) -> None:
        cursor: str | None = None
        while True:
            page = await self.ctx.store.list_executions(
                parent_execution_id=parent_id, limit=200, cursor=cursor
            )
            for child in page.items:
                await self._cancel_orphan(parent_id, child.execution_id)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def _cancel_orphan(self, parent_id: str, child_id: str) -> None:
        store = self.ctx.store
        parent, child = await store.get_execution(parent_id), await store.get_execution(child_id)
        if child is None or not orphaned(parent, child):
            return
        try:
            await self.cancel(child_id, Identity(username=PARENT_DECIDER, uid=parent_id))
        except (Conflict, NotFound):
            return  # it ended meanwhile

    async def sweep(self) -> int:
        """Every suspended parent whose child moved on (an OE that died between the two): lifted."""
        lifted = 0
        cursor: str | None = None
        while True:
            page = await self.ctx.store.list_executions(status=S.SUSPENDED, limit=200, cursor=cursor)
            for record in page.items:
                child_id = waited_child(record.suspension)
                if child_id is not None and await self._lift(record.execution_id, child_id):
                    lifted += 1
            if page.next_cursor is None:
                return lifted
            cursor = page.next_cursor

    async def _lift(self, parent_id: str, child_id: str) -> bool:
        store = self.ctx.store
        parent, child = await store.get_execution(parent_id), await store.get_execution(child_id)
        if parent is None or child is None or not lifts(parent, child):
            return False
        try:
            await self.resume(
                parent_id,
                ReviewDecision(
                    decision="approved",
                    reviewer_notes=f"child execution {child_id} is {child.status.value}",
                ),
                decided_by=Identity(username=CHILD_DECIDER, uid=child_id),
                by_child=True,
            )
        except (Conflict, NotFound, BadReview):
            return False  # another replica (or the other trigger) lifted it first
        return True

    def _spawn(self, work: Awaitable[Any]) -> None:
        async def run() -> None:
            try:
                await work
            except Exception:  # the sweep lifts it later; a crash here must not go unsaid
                logger.exception("lifting a child's parent hold failed; the watchdog's sweep retries")

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
