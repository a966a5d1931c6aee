"""Session fork (LG-18, issue 39): a finished execution's turn again, in a new session, from step N.

The durable branch is the OE's half: a new execution in a new session whose replay cache holds the
parent's steps before N (copied, as they were answered), so its run gets them from the cache and runs
live from N on. The checkpoint lineage is the AER's half (`POST /threads/{session}/fork`): the parent
thread's checkpoints up to the parent's turn start, copied natively into the new session's thread. The
new execution then starts as a restarted run does, replaying the turn from that checkpoint. The parent's
execution, steps, audit and thread are read only.
"""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

from agent_runtime.oe import spans
from agent_runtime.oe.context import EngineContext
from agent_runtime.oe.errors import Conflict, NotFound
from agent_runtime.oe.lifecycle import is_terminal
from agent_runtime.oe.runs import Runs
from agent_runtime.oe.store.base import ExecutionRecord, Identity
from agent_runtime.protocol import ExecutionState

FORK_REFUSED = "fork_refused"


def fork_path(session_id: str) -> str:
    return f"/threads/{quote(session_id, safe='')}/fork"


class Forks:
    def __init__(self, ctx: EngineContext, *, runs: Runs) -> None:
        self.ctx = ctx
        self.runs = runs

    async def fork(
        self,
        execution_id: str,
        *,
        step: int,
        agent: str,
        session_id: str | None = None,
        invoked_by: Identity | None = None,
    ) -> ExecutionRecord:
        """The new execution, started; the parent is `agent`'s finished `execution_id`."""
        parent = await self.ctx.store.get_execution(execution_id)
        if parent is None or parent.agent != agent:
            raise NotFound(f"no execution {execution_id!r} of {agent}")
        if not is_terminal(parent.status):
            state = parent.status.value
            raise Conflict(FORK_REFUSED, f"execution {execution_id!r} is {state}: fork a finished one")
        if not 1 <= step <= parent.step_count + 1:
            last = parent.step_count + 1
            raise Conflict(FORK_REFUSED, f"step {step} is not a step of {execution_id!r} (1..{last})")
        reg = self.ctx.registry.get(parent.agent)
        if reg is None:
            raise NotFound(f"no Agent {parent.agent!r}")
        now = self.ctx.clock()
        record = ExecutionRecord(
            execution_id=uuid.uuid4().hex,
            agent=parent.agent,
            project_id=parent.project_id,
            workspace_id=parent.workspace_id,
            session_id=session_id or uuid.uuid4().hex,
            user_id=parent.user_id,
            org_id=parent.org_id,
            input=parent.input,
            created_at=now,
            updated_at=now,
            invoked_by=invoked_by,
            # Started as a restarted run is (a resume of a running execution): this is its first run.
            status=ExecutionState.RUNNING,
            runs=1,
            forked_from=parent.execution_id,
            at_step=step,
        )
        if record.session_id == parent.session_id:
            raise Conflict(FORK_REFUSED, "a fork goes to a new session: name another session_id (or none)")
        # The AER copies the thread first: a refusal there leaves nothing behind in the OE.
        body = {
            "execution_id": parent.execution_id,
            "to_session_id": record.session_id,
            "to_execution_id": record.execution_id,
        }
        status, answer = await self.ctx.runtimes.aer_json(
            reg, "POST", fork_path(parent.session_id), body=json.dumps(body).encode()
        )
        if status != 200:
            detail = answer.get("detail") if isinstance(answer, dict) else answer
            raise Conflict(FORK_REFUSED, f"the AER did not fork the thread (HTTP {status}): {detail}")
        record.trace_context = spans.execution_started(execution_id=record.execution_id, agent=reg.agent)
        await self.ctx.store.create_execution(record)
        await self._copy_steps(parent.execution_id, record.execution_id, before=step)
        data: dict[str, Any] = {"agent": reg.agent, "forked_from": parent.execution_id, "at_step": step}
        await self.ctx.events.publish(record.execution_id, type="created", data=data)
        await self.ctx.events.publish(record.execution_id, type="running")
        # A restarted run's start: the AER replays the turn from the copied checkpoint (checkpoint_branch.py).
        self.runs.start_later(record, reg, resume=True, counted=True)
        return record

    async def _copy_steps(self, parent: str, child: str, *, before: int) -> None:
        for number in range(1, before):
            found = await self.ctx.store.get_step(parent, number)
            if found is None or found.state != "done":
                continue
            await self.ctx.store.claim_step(found.model_copy(update={"execution_id": child}))
