"""Kinds of held step the agent asks for, and what a reviewer's decision answers each (issue 31).

An agent-level hold (`tool: agent_suspend`) is one of:

- `suspend`: `app.suspend(reason, payload)`; the decision answers `{decision, reviewer_notes}`;
- `interrupt`: LangGraph's `interrupt(value)` in a node; the payload is the value; an approval may carry
  `value` (any JSON), which `interrupt()` returns in the resumed graph (`Command(resume=value)`);
- `breakpoint`: a static `interrupt_before` / `interrupt_after`; approval continues the graph.

`value` is this project's addition to the seed's flat resume body and is refused for every other kind.
Pure functions: the engine calls them; the wire shape of the answer is `SuspendReply.answer()`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_runtime.protocol import ReviewDecision, SuspendReply

# A call the policy holds for a reviewer (requireApproval, or a sensitive tool): not an agent-level hold.
APPROVAL_REQUIRED = "approval_required"
# A child execution (an agentRef tool, oe/children.py) waits for a human, or still runs: the parent holds
# at the calling step until the child ends; only the child's end resumes it (the child's own review decides).
CHILD = "child"
SUSPEND = "suspend"
INTERRUPT = "interrupt"
BREAKPOINT = "breakpoint"
AGENT_HOLD_KINDS = (INTERRUPT, BREAKPOINT)


def agent_hold_kind(args: Mapping[str, Any]) -> str:
    """The kind of an agent-level hold from its call's arguments (`suspend` unless it names another)."""
    kind = args.get("kind")
    return kind if isinstance(kind, str) and kind in AGENT_HOLD_KINDS else SUSPEND


def value_problem(kind: str, review: ReviewDecision) -> str | None:
    """Why this decision's `value` does not fit the hold, or None (no value, or an approved interrupt)."""
    if "value" not in review.model_fields_set:
        return None
    if kind != INTERRUPT:
        return (
            f"this execution waits on a {kind} hold, not on a LangGraph interrupt(): only an interrupt "
            "takes a value; drop value"
        )
    if review.decision != "approved":
        return "a value goes with an approved decision only (interrupt() returns it); drop value, or approve"
    return None


def decided_answer(*, kind: str, decision: str, reviewer_notes: str | None, value: Any) -> dict[str, Any]:
    """What the held step answers once decided (the same as the reply the resumed run is handed)."""
    return SuspendReply(
        step=1, reason="", decision=decision, reviewer_notes=reviewer_notes, kind=kind, value=value
    ).answer()
