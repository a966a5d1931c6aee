"""The OE's side of `spec.limits` (issue 34): counts kept in the store, decisions from oe/limits.py.

Every call the cache cannot answer is counted into its execution's counters before it is policed (so a
condition sees `usage` with this call in it); a model call's tokens and cost are added once its audit
record says what they were, to the execution's and the day's counters (the Agent's and the user's).
A refusal says which limit, its value and the figure, and the category the execution fails with.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from agent_runtime.oe.limit_holds import raised
from agent_runtime.oe.limits import (
    DAY_S,
    Limits,
    Refusal,
    check_call,
    check_concurrency,
    check_day,
    day_ends,
    day_keys,
    execution_key,
    rate_windows,
)
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.store.base import ExecutionRecord, Store
from agent_runtime.protocol import ExecutionState

logger = logging.getLogger(__name__)

# How long an execution's counters are kept: long past any execution's life.
_EXECUTION_HORIZON_S = 30 * DAY_S
DEFAULT_LIMITS_ENV = "OE_DEFAULT_LIMITS"


class LimitReached(Exception):
    """An `/invoke` over a limit: 429 with Retry-After."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def default_limits_from_env(env: Mapping[str, str] | None = None) -> Limits | None:
    """The chart's namespace-wide defaults (`OE_DEFAULT_LIMITS`, JSON of spec.limits fields)."""
    text = (env if env is not None else os.environ).get(DEFAULT_LIMITS_ENV, "").strip()
    if not text:
        return None
    try:
        return Limits.model_validate(json.loads(text))
    except ValueError as exc:
        raise ValueError(f"{DEFAULT_LIMITS_ENV} must be a JSON object of spec.limits fields: {exc}") from None


class Limiter:
    def __init__(self, store: Store, *, clock: Callable[[], float], defaults: Limits | None = None) -> None:
        self._store = store
        self._clock = clock
        self._defaults = defaults

    def limits_of(self, reg: AgentRegistration) -> Limits:
        return reg.limits.merged_over(self._defaults)

    async def admit(self, reg: AgentRegistration, *, user_id: str | None) -> bool:
        """Before `/invoke` creates an execution: the day's budgets and the executions at once. True: it
        must wait, queued (onLimit: queue, over the limit or behind executions queued before it)."""
        limits = self.limits_of(reg)
        if limits.empty:
            return False
        now = self._clock()
        refusal = await self._day_refusal(limits, reg.agent, user_id, now)
        if refusal is None:
            if limits.on_limit == "queue" and await self._queued(reg.agent):
                return True  # first in, first out: nobody overtakes an execution already waiting
            refusal = await self.room(reg, user_id=user_id)
            if refusal is not None and limits.on_limit == "queue":
                return True
        if refusal is not None:
            logger.info(
                "invoke of %s refused (user %s): spec.limits.%s is %s, figure %s",
                reg.agent,
                user_id,
                refusal.limit,
                refusal.value,
                refusal.figure,
            )
            raise LimitReached(refusal)
        return False

    async def room(self, reg: AgentRegistration, *, user_id: str | None) -> Refusal | None:
        """The executions-at-once limits (the Agent's, the user's) for one more execution; None: room."""
        limits = self.limits_of(reg)
        if not (limits.max_concurrent_executions or limits.max_concurrent_executions_per_user):
            return None
        agent_running, user_running = await self._running(reg.agent, user_id)
        return check_concurrency(
            limits,
            agent_running=agent_running,
            user_running=user_running if limits.max_concurrent_executions_per_user else None,
        )

    async def _queued(self, agent: str) -> bool:
        page = await self._store.list_executions(agent=agent, status=ExecutionState.QUEUED, limit=1)
        return bool(page.items)

    async def count_call(
        self, reg: AgentRegistration, record: ExecutionRecord, *, is_llm: bool
    ) -> dict[str, float]:
        """Count one call into its execution; the counters after it (what conditions see as `usage`).
        An Agent with neither limits nor conditions costs no store write per step."""
        if self.limits_of(reg).empty and not _has_conditions(reg):
            return {}
        now = self._clock()
        deltas = {"steps": 1.0, "model_calls": float(is_llm), "tool_calls": float(not is_llm)}
        return await self._store.add_usage(
            execution_key(record.execution_id), deltas, expires_at=now + _EXECUTION_HORIZON_S
        )

    async def check_call(
        self, reg: AgentRegistration, record: ExecutionRecord, usage: dict[str, float], *, is_llm: bool
    ) -> Refusal | None:
        """The execution's and the day's limits, before the call runs (as a reviewer raised them for this
        execution, onExceed: suspend)."""
        limits = raised(self.limits_of(reg), record.reviews)
        if limits.empty:
            return None
        refusal = check_call(limits, usage, is_llm=is_llm)
        if refusal is None:
            refusal = await self._day_refusal(limits, reg.agent, record.user_id, self._clock())
        return refusal

    async def take_rate(self, reg: AgentRegistration, *, tool: str) -> Refusal | None:
        """A token from each bucket the tool call draws on (the Agent's, the tool's); a refusal if any is
        empty. Tokens taken from an earlier bucket stay taken: the call was attempted."""
        now = self._clock()
        for window in rate_windows(self.limits_of(reg), agent=reg.agent, tool=tool):
            slot = await self._store.take_rate_slot(window.key, window.slots(now), expires_at=now + 120)
            if slot is None:
                return window.refusal(now)
        return None

    async def metered(self, record: ExecutionRecord, *, tokens: int, cost: float | None) -> None:
        """A model call's tokens and cost, added to the execution's and the day's counters."""
        if tokens <= 0 and not cost:
            return
        now = self._clock()
        deltas = {"tokens": float(tokens), "cost": float(cost or 0.0)}
        await self._store.add_usage(
            execution_key(record.execution_id), deltas, expires_at=now + _EXECUTION_HORIZON_S
        )
        agent_day, user_day = day_keys(record.agent, record.user_id, now)
        ends = day_ends(now) + DAY_S
        await self._store.add_usage(agent_day, deltas, expires_at=ends)
        if user_day is not None:
            await self._store.add_usage(user_day, deltas, expires_at=ends)

    async def usage(self, execution_id: str) -> dict[str, float]:
        return await self._store.get_usage(execution_key(execution_id))

    async def _day_refusal(
        self, limits: Limits, agent: str, user_id: str | None, now: float
    ) -> Refusal | None:
        wanted_agent = limits.max_tokens_per_day is not None or limits.max_cost_per_day is not None
        wanted_user = user_id is not None and (
            limits.max_tokens_per_user_per_day is not None or limits.max_cost_per_user_per_day is not None
        )
        if not (wanted_agent or wanted_user):
            return None
        agent_key, user_key = day_keys(agent, user_id, now)
        agent_day = await self._store.get_usage(agent_key) if wanted_agent else {}
        user_day = await self._store.get_usage(user_key) if wanted_user and user_key else None
        return check_day(limits, agent_day=agent_day, user_day=user_day, now=now)

    async def _running(self, agent: str, user_id: str | None) -> tuple[int, int]:
        """Executions of `agent` pending or running, and those of them of `user_id`."""
        agent_count = user_count = 0
        for state in (ExecutionState.PENDING, ExecutionState.RUNNING):
            cursor: str | None = None
            while True:
                page = await self._store.list_executions(agent=agent, status=state, limit=500, cursor=cursor)
                agent_count += len(page.items)
                user_count += sum(1 for item in page.items if user_id is not None and item.user_id == user_id)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
        return agent_count, user_count


def _has_conditions(reg: AgentRegistration) -> bool:
    policy = reg.policy
    rules = (*policy.deny, *policy.require_approval, *policy.deny_when, *policy.require_approval_when)
    return any(not isinstance(rule, str) and rule.when for rule in rules)


def refusal_detail(refusal: Refusal) -> dict[str, Any]:
    """What the audit record and the 429 body say of a refusal."""
    detail: dict[str, Any] = {"limit": refusal.limit, "value": refusal.value, "figure": refusal.figure}
    if refusal.resets_at is not None:
        detail["resets_at"] = refusal.resets_at
    if refusal.retry_after_s is not None:
        detail["retry_after_s"] = round(refusal.retry_after_s, 3)
    return detail
