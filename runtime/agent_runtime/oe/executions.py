"""Executions as clients and runtimes find them: creating one (`/invoke`), reading one, and the owner
check every runtime call starts with (issue 42)."""

from __future__ import annotations

import uuid

from agent_runtime.execution_token import EXPORT_TTL_S, expires_at
from agent_runtime.oe import spans
from agent_runtime.oe.context import EngineContext
from agent_runtime.oe.errors import NotFound, UnknownAgent
from agent_runtime.oe.limiter import Limiter
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.runs import Runs
from agent_runtime.oe.store.base import ExecutionRecord, Identity, ParentLink
from agent_runtime.protocol import ExecutionState, InvokeRequest


class Executions:
    def __init__(self, ctx: EngineContext, *, limiter: Limiter, runs: Runs) -> None:
        self.ctx = ctx
        self.limiter = limiter
        self.runs = runs

    def registration(self, agent: str, *, hint: str) -> AgentRegistration:
        reg = self.ctx.registry.get(agent)
        if reg is None:
            raise UnknownAgent(
                f"no Agent {agent!r} is registered with this Orchestration Engine; check {hint} that "
                "the Agent is Ready"
            )
        return reg

    def memory_export_statement(
        self, agent: str, *, user_id: str, org_id: str | None
    ) -> tuple[str, float] | None:
        """A read-only memory statement (`purpose: export`) for one user of `agent`, and its expiry; None
        when this OE signs nothing (no key: its runtimes check no statement either). The caller's right to
        it is the client route's to check."""
        reg = self.registration(agent, hint="the project and the name, and")
        statements = reg.statements(
            "memory", user_id=user_id, org_id=org_id, ttl_s=EXPORT_TTL_S, purpose="export"
        )
        if not statements:
            return None
        return statements[0], expires_at(statements[0])

    async def invoke(
        self,
        request: InvokeRequest,
        *,
        invoked_by: Identity | None = None,
        execution_id: str | None = None,
        parent: ParentLink | None = None,
    ) -> ExecutionRecord:
        """Create the execution (pending) and start it on the Agent's AER in the background. `parent` and
        `execution_id` are the OE's own, for a child an agentRef starts (oe/children.py): no client sets
        them. KeyError when `execution_id` exists already."""
        reg = self.registration(request.agent, hint="the name (<namespace>/<name>) and")
        # LimitReached: a 429 with Retry-After; True: it waits queued (onLimit: queue, oe/admissions.py).
        queued = await self.limiter.admit(reg, user_id=request.user_id)
        now = self.ctx.clock()
        record = ExecutionRecord(
            execution_id=execution_id or uuid.uuid4().hex,
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
            status=ExecutionState.QUEUED if queued else ExecutionState.PENDING,
            parent=parent,
        )
        record.trace_context = spans.execution_started(execution_id=record.execution_id, agent=reg.agent)
        await self.ctx.store.create_execution(record)
        created: dict[str, object] = {"agent": reg.agent}
        if parent is not None:
            created["parent"] = parent.model_dump()
        await self.ctx.events.publish(record.execution_id, type="created", data=created)
        if queued:
            await self.ctx.events.publish(record.execution_id, type="queued")
            return record
        self.runs.start_later(record, reg, resume=False)
        return record

    async def get(self, execution_id: str, *, project_id: str | None = None) -> ExecutionRecord:
        record = await self.ctx.store.get_execution(execution_id)
        if record is None or (project_id is not None and record.project_id != project_id):
            # The same words whether it does not exist or belongs to another project.
            where = f" in project {project_id!r}" if project_id is not None else ""
            raise NotFound(f"no execution {execution_id!r}{where}")
        return record

    async def owned(self, caller: AgentRegistration, execution_id: str) -> ExecutionRecord:
        """The execution, if it belongs to the calling Agent; otherwise 404 exactly as if it did not exist."""
        record = await self.ctx.store.get_execution(execution_id)
        if record is None or record.agent != caller.agent:
            raise NotFound(f"no execution {execution_id!r}")
        return record
