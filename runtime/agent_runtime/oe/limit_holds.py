"""A limit reached mid-run with `onExceed: suspend` (issue 34): the call is held for a human who may raise
the limit for this execution. Pure functions over the held payload and the execution's reviews.

The hold is of kind `limit`: it names the limit, its value and the figure reached (the audit record says
the same). A reviewer who approves raises the limit for the rest of this execution, to `value` when the
decision carries a number above the limit, to twice the limit otherwise, and the held call runs; a
rejection fails the execution with the limit's category, as `onExceed: fail` would have. A rate limit
raised this way lets the held call through; the shared bucket itself is never raised for one execution.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic.alias_generators import to_camel

from agent_runtime.oe.limits import Limits, Refusal
from agent_runtime.oe.store.base import Review
from agent_runtime.protocol import ReviewDecision, ToolExecuteRequest

LIMIT = "limit"
# spec.limits' camelCase names of the limits a review may raise for one execution, and their fields.
RAISABLE = {
    to_camel(name): name
    for name in (
        "max_steps_per_execution",
        "max_model_calls_per_execution",
        "max_tokens_per_execution",
        "max_cost_per_execution",
        "max_tokens_per_day",
        "max_cost_per_day",
        "max_tokens_per_user_per_day",
        "max_cost_per_user_per_day",
    )
}


def limit_hold(call: ToolExecuteRequest, refusal: Refusal, *, llm: dict[str, Any] | None) -> dict[str, Any]:
    """The suspension a limit reached mid-run holds: what the reviewer sees and what runs once approved."""
    held: dict[str, Any] = {
        "kind": LIMIT,
        "tool": call.tool,
        "args": call.args,
        "step": call.step,
        "reason": f"{refusal.message}; a reviewer may raise it for this execution (onExceed: suspend)",
        "payload": {
            "limit": refusal.limit,
            "value": refusal.value,
            "figure": refusal.figure,
            "category": refusal.category,
        },
    }
    if llm is not None:
        held["llm"] = llm
    return held


def refusal_of(held: dict[str, Any], *, notes: str | None) -> Refusal:
    """A rejected limit hold as the refusal `onExceed: fail` would have made."""
    payload = held.get("payload") if isinstance(held.get("payload"), dict) else {}
    limit = str(payload.get("limit") or "limit")
    value = _number(payload.get("value")) or 0.0
    figure = _number(payload.get("figure")) or 0.0
    category = str(payload.get("category") or "budget_exceeded")
    return Refusal(
        limit=limit,
        value=value,
        figure=figure,
        category=category,
        message=f"spec.limits.{limit} ({value:g}) was reached ({figure:g}) and the reviewer did not raise "
        f"it: {notes or 'no notes'}",
    )


def raised_to(payload: Any, value: Any) -> float | None:
    """The limit an approval sets for this execution: `value` when it is a number above the limit, else
    twice the limit; None when the payload names no limit."""
    if not isinstance(payload, dict):
        return None
    limit = _number(payload.get("value"))
    if limit is None:
        return None
    asked = _number(value)
    return asked if asked is not None and asked > limit else 2 * limit


def raised(limits: Limits, reviews: Iterable[Review]) -> Limits:
    """The Agent's limits for one execution: each limit a reviewer approved raising, raised (the latest
    approval of a limit wins: a second hold of it already reports the raised value)."""
    update: dict[str, Any] = {}
    for review in reviews:
        if review.kind != LIMIT or review.decision != "approved" or not isinstance(review.payload, dict):
            continue
        field = RAISABLE.get(str(review.payload.get("limit")))
        new = raised_to(review.payload, review.value)
        if field is None or new is None:
            continue
        current = getattr(limits, field)
        update[field] = int(new) if isinstance(current, int) and float(new).is_integer() else new
    return limits.model_copy(update=update) if update else limits


def value_problem(review: ReviewDecision) -> str | None:
    """Why a decision's `value` does not fit a limit hold, or None (no value, or a number with approval)."""
    if "value" not in review.model_fields_set or review.value is None:
        return None
    if review.decision != "approved":
        return "a value (the raised limit) goes with an approved decision only; drop value, or approve"
    if _number(review.value) is None or review.value <= 0:
        return "the raised limit must be a number above 0 (the limit for the rest of this execution)"
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
