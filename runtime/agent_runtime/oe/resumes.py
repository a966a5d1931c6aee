"""Reviews (issue 42): a human's decision on a suspended execution, the inbox of those that wait, and the
deadlines the watchdog decides as the system (issue 34)."""

from __future__ import annotations

from agent_runtime.oe.context import EngineContext
from agent_runtime.oe.deadlines import SYSTEM_DECIDER, expired
from agent_runtime.oe.errors import BadReview, Conflict, NotFound
from agent_runtime.oe.executions import Executions
from agent_runtime.oe.notify import ReviewEvent
from agent_runtime.oe.recorder import Recorder
from agent_runtime.oe.resume_plan import (
    child_hold_problem,
    claimed_decision,
    executed,
    hold_kind,
    not_suspended,
    problem,
    review_entry,
)
from agent_runtime.oe.review_notices import ReviewNotices
from agent_runtime.oe.runs import Runs
from agent_runtime.oe.store.base import ExecutionRecord, Identity
from agent_runtime.protocol import ExecutionState, ReviewDecision

S = ExecutionState


class Resumes:
    def __init__(
        self,
        ctx: EngineContext,
        *,
        executions: Executions,
        recorder: Recorder,
        runs: Runs,
        notices: ReviewNotices,
    ) -> None:
        self.ctx = ctx
        self.executions = executions
        self.recorder = recorder
        self.runs = runs
        self.notices = notices

    async def resume(
        self,
        execution_id: str,
        review: ReviewDecision,
        *,
        project_id: str | None = None,
        decided_by: Identity | None = None,
        announce: ReviewEvent = "review.decided",
        by_child: bool = False,
    ) -> ExecutionRecord:
        """Record the human decision and re-run the agent from the start.

        The decision is written with the state change, in one atomic write, and nothing runs here: the
        replay applies it when the agent reaches the suspended step again (an approved call runs then, once,
        through the same path as every call). So an OE that dies right after answering loses nothing, and a
        second resume finds the execution running (409).
        """
        record = await self.executions.get(execution_id, project_id=project_id)
        if record.status is not S.SUSPENDED:
            raise Conflict("not_suspended", not_suspended(record))
        reg = self.ctx.registry.get(record.agent)
        if reg is None:
            raise Conflict("agent_not_registered", f"Agent {record.agent!r} is no longer registered")
        suspension = record.suspension or {}
        misfit = child_hold_problem(suspension, by_child=by_child) or problem(hold_kind(suspension), review)
        if misfit is not None:
            raise BadReview(*misfit)
        # One decision per suspension, claimed under a unique key: a second reviewer's different decision is
        # refused even where the state's compare-and-set is not atomic across replicas (FerretDB v1). The
        # same decision sent again (a client whose answer was lost) goes on.
        decided = claimed_decision(review)
        taken = await self.ctx.store.claim_once(f"decision:{execution_id}:{len(record.reviews)}", decided)
        if taken is not None and taken != decided:
            raise Conflict(
                "already_decided",
                f"another decision ({taken.get('decision')}) was already made on this suspension; "
                "read the execution for its state",
            )
        now = self.ctx.clock()
        entry = review_entry(suspension, review, decided_by=decided_by, now=now)
        # One resume wins: the decision and the state move together, before anything runs.
        updated = await self.ctx.store.transition(
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
            current = await self.executions.get(execution_id)
            raise Conflict("not_suspended", not_suspended(current))
        self.ctx.observer.decided(record.agent, review.decision, max(0.0, now - record.updated_at))
        await self.recorder.audit(
            updated,
            kind="resume",
            step=entry.step,
            tool=entry.tool,
            decision=review.decision,
            reason=review.reviewer_notes,
            args={"requested": suspension.get("args"), "executed": executed(suspension, review)},
            secrets=self.ctx.secrets.of(reg),
            status="accepted",
            decided_by=decided_by,
        )
        await self.ctx.events.publish(
            execution_id, type="resumed", step=entry.step, data={"decision": review.decision}
        )
        self.notices.announce(reg, announce, record.model_copy(update={"reviews": updated.reviews}))
        self.runs.start_later(updated, reg, resume=True, counted=True)
        return updated

    async def pending(
        self,
        project_id: str | None,
        *,
        limit: int = 50,
        cursor: str | None = None,
        project_ids: frozenset[str] | None = None,
    ) -> tuple[list[ExecutionRecord], str | None]:
        """The project's (or, with `project_ids`, those projects') suspended executions, newest first: each
        waits for a human's decision."""
        page = await self.ctx.store.list_executions(
            project_id=project_id, project_ids=project_ids, status=S.SUSPENDED, limit=limit, cursor=cursor
        )
        return page.items, page.next_cursor

    async def expire(self, now: float) -> int:
        """Decide every held call whose approval deadline passed, as its rule's onTimeout says, recorded as
        decided by the system (issue 34); a replica that decided first wins (the others get a Conflict)."""
        decided = 0
        cursor: str | None = None
        while True:
            page = await self.ctx.store.list_executions(status=S.SUSPENDED, limit=200, cursor=cursor)
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
