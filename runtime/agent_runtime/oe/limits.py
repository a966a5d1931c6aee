"""An Agent's limits (`spec.limits`, issue 34): pure decisions over counts the store keeps.

Per execution: steps, model calls, tokens and cost. Per day (UTC) per Agent and per user: tokens and cost
(cost from the price table, oe/usage.py; without one, only the token limits apply). Per minute: tool
calls per Agent and per tool, as a token bucket shared by every OE replica through the store (see
`rate_slots`). At once: executions per Agent and per user, checked at `/invoke`.

Every function here decides from numbers it is given; the engine reads and writes the counts
(`Store.add_usage`, `Store.take_rate_slot`) and audits each refusal with the limit and the figure.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

BUDGET_EXCEEDED = "budget_exceeded"
RATE_LIMITED = "rate_limited"
DAY_S = 86_400.0


class Limits(BaseModel):
    """`spec.limits` of an Agent (and the chart's namespace-wide defaults, which an Agent's own override
    field by field). Unset means no limit."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    max_steps_per_execution: int | None = Field(default=None, ge=1)
    max_model_calls_per_execution: int | None = Field(default=None, ge=1)
    max_tokens_per_execution: int | None = Field(default=None, ge=1)
    max_cost_per_execution: float | None = Field(default=None, gt=0)
    max_tokens_per_day: int | None = Field(default=None, ge=1)
    max_cost_per_day: float | None = Field(default=None, gt=0)
    max_tokens_per_user_per_day: int | None = Field(default=None, ge=1)
    max_cost_per_user_per_day: float | None = Field(default=None, gt=0)
    tool_calls_per_minute: int | None = Field(default=None, ge=1)
    tool_calls_per_minute_by_tool: dict[str, int] = Field(default_factory=dict)
    max_concurrent_executions: int | None = Field(default=None, ge=1)
    max_concurrent_executions_per_user: int | None = Field(default=None, ge=1)
    # What /invoke does over maxConcurrentExecutions(PerUser): a 429, or the execution waits `queued` and
    # starts, oldest first, when a slot frees (oe/admissions.py).
    on_limit: Literal["reject", "queue"] = "reject"
    # What a limit reached mid-run does: fail the execution, or hold the call for a reviewer who may raise
    # the limit for this execution (oe/limit_holds.py).
    on_exceed: Literal["fail", "suspend"] = "fail"

    def merged_over(self, defaults: Limits | None) -> Limits:
        """These limits, each unset one taken from `defaults` (the namespace-wide values)."""
        if defaults is None:
            return self
        mine = self.model_dump(exclude_unset=True)
        return defaults.model_copy(update=mine)

    @property
    def empty(self) -> bool:
        return self == Limits()


@dataclass(frozen=True)
class Refusal:
    """A limit reached: which, the figure, the category the execution fails with, and when to retry."""

    limit: str  # the field's name in spec.limits
    value: float  # the limit
    figure: float  # what was counted (including this call)
    category: str  # budget_exceeded | rate_limited
    message: str
    retry_after_s: float | None = None
    resets_at: float | None = None  # epoch seconds (daily budgets)

    def audit_fields(self) -> dict[str, object]:
        return {"limit": self.limit, "value": self.value, "figure": self.figure}


def execution_key(execution_id: str) -> str:
    return f"exec:{execution_id}"


def day_of(now: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(now))


def day_ends(now: float) -> float:
    """The next UTC midnight after `now`: when a daily budget resets."""
    return (math.floor(now / DAY_S) + 1) * DAY_S


def day_keys(agent: str, user: str | None, now: float) -> tuple[str, str | None]:
    day = day_of(now)
    return f"day:{agent}:{day}", (f"day:{agent}:{day}:user:{user}" if user else None)


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def check_call(limits: Limits, usage: dict[str, float], *, is_llm: bool) -> Refusal | None:
    """Before a call runs: `usage` is the execution's counts with this call already counted (steps,
    model_calls) and the tokens and cost of the calls before it."""
    checks: list[tuple[str, int | float | None, float, str]] = [
        ("maxStepsPerExecution", limits.max_steps_per_execution, usage.get("steps", 0), "steps"),
    ]
    if is_llm:
        checks.append(
            (
                "maxModelCallsPerExecution",
                limits.max_model_calls_per_execution,
                usage.get("model_calls", 0),
                "model calls",
            )
        )
    for name, limit, figure, what in checks:
        if limit is not None and figure > limit:
            return Refusal(
                limit=name,
                value=limit,
                figure=figure,
                category=BUDGET_EXCEEDED,
                message=f"this call would be the execution's {figure:g}th of its {what}; spec.limits.{name} "
                f"is {limit:g}",
            )
    for name, limit, figure, what in (
        ("maxTokensPerExecution", limits.max_tokens_per_execution, usage.get("tokens", 0), "tokens"),
        ("maxCostPerExecution", limits.max_cost_per_execution, usage.get("cost", 0), "cost"),
    ):
        if limit is not None and figure >= limit:
            return Refusal(
                limit=name,
                value=limit,
                figure=figure,
                category=BUDGET_EXCEEDED,
                message=f"the execution has used {figure:g} {what}; spec.limits.{name} is {limit:g}",
            )
    return None


def check_day(
    limits: Limits, *, agent_day: dict[str, float], user_day: dict[str, float] | None, now: float
) -> Refusal | None:
    """Before an execution starts or a call runs: the day's tokens and cost of the Agent and of the user."""
    resets = day_ends(now)
    checks = [
        ("maxTokensPerDay", limits.max_tokens_per_day, agent_day.get("tokens", 0), "the Agent", "tokens"),
        ("maxCostPerDay", limits.max_cost_per_day, agent_day.get("cost", 0), "the Agent", "cost"),
    ]
    if user_day is not None:
        checks += [
            (
                "maxTokensPerUserPerDay",
                limits.max_tokens_per_user_per_day,
                user_day.get("tokens", 0),
                "this user",
                "tokens",
            ),
            (
                "maxCostPerUserPerDay",
                limits.max_cost_per_user_per_day,
                user_day.get("cost", 0),
                "this user",
                "cost",
            ),
        ]
    for name, limit, figure, whose, what in checks:
        if limit is not None and figure >= limit:
            return Refusal(
                limit=name,
                value=limit,
                figure=figure,
                category=BUDGET_EXCEEDED,
                message=f"{whose} has used {figure:g} {what} today (UTC); spec.limits.{name} is {limit:g}; "
                f"it resets at {_iso(resets)}",
                retry_after_s=resets - now,
                resets_at=resets,
            )
    return None


@dataclass(frozen=True)
class RateWindow:
    """One token bucket as claimable slots: `per_minute` tokens refill at one per `60 / per_minute`
    seconds, and a bucket holds at most `per_minute`. A call takes any free slot among the last
    `per_minute` slot numbers up to now; a slot is a unique key in the store, so two OE replicas can never
    take the same one, and at most `per_minute` calls fit in any minute."""

    key: str
    limit: str
    per_minute: int

    def slot_width(self) -> float:
        return 60.0 / self.per_minute

    def slots(self, now: float) -> list[int]:
        """The slot numbers a call at `now` may take, newest first."""
        newest = math.floor(now / self.slot_width())
        return [newest - offset for offset in range(self.per_minute)]

    def retry_after(self, now: float) -> float:
        """When the next slot opens (every slot of the window is taken)."""
        width = self.slot_width()
        return (math.floor(now / width) + 1) * width - now

    def refusal(self, now: float) -> Refusal:
        wait = self.retry_after(now)
        return Refusal(
            limit=self.limit,
            value=self.per_minute,
            figure=self.per_minute + 1,
            category=RATE_LIMITED,
            message=f"over spec.limits.{self.limit} ({self.per_minute} per minute); the next call may run "
            f"in {wait:.1f}s",
            retry_after_s=wait,
        )


def rate_windows(limits: Limits, *, agent: str, tool: str) -> list[RateWindow]:
    """The buckets a tool call (never a model call) takes a token from: the Agent's, then the tool's."""
    windows = []
    if limits.tool_calls_per_minute is not None:
        windows.append(RateWindow(f"rate:{agent}", "toolCallsPerMinute", limits.tool_calls_per_minute))
    per_tool = limits.tool_calls_per_minute_by_tool.get(tool)
    if per_tool is not None:
        windows.append(RateWindow(f"rate:{agent}:{tool}", f"toolCallsPerMinuteByTool[{tool}]", per_tool))
    return windows


def check_concurrency(limits: Limits, *, agent_running: int, user_running: int | None) -> Refusal | None:
    """At `/invoke`: executions of the Agent (and of the user) pending or running, before this one."""
    for name, limit, figure, whose in (
        ("maxConcurrentExecutions", limits.max_concurrent_executions, agent_running, "the Agent"),
        (
            "maxConcurrentExecutionsPerUser",
            limits.max_concurrent_executions_per_user,
            user_running,
            "this user",
        ),
    ):
        if limit is not None and figure is not None and figure >= limit:
            return Refusal(
                limit=name,
                value=limit,
                figure=figure + 1,
                category=RATE_LIMITED,
                message=f"{whose} already has {figure} executions pending or running; "
                f"spec.limits.{name} is {limit}: wait for one to finish",
                retry_after_s=5.0,
            )
    return None


__all__ = [
    "BUDGET_EXCEEDED",
    "RATE_LIMITED",
    "Limits",
    "RateWindow",
    "Refusal",
    "check_call",
    "check_concurrency",
    "check_day",
    "day_ends",
    "day_keys",
    "execution_key",
    "rate_windows",
]
