"""Approval deadlines (issue 34): a held call carries when it expires and what the OE then decides.

`approval: {timeout: 30m, onTimeout: reject|approve}` on a `requireApproval` rule or on the Agent's
`spec.tools` is stamped into the suspension when the call is held (`stamp`); the OE's watchdog asks
`expired` of each suspended execution and resumes it with that decision, recorded as decided by the system.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agent_runtime.oe.policy import ApprovalSettings

# Who a decision at the deadline is recorded as made by (no client made it).
SYSTEM_DECIDER = "system:agent-engine:approval-timeout"


@dataclass(frozen=True)
class Expiry:
    decision: Literal["approved", "rejected"]
    notes: str


def stamp(held: dict[str, Any], approval: ApprovalSettings | None, *, now: float) -> dict[str, Any]:
    """The held payload with its deadline and the decision at it, when the rule sets one."""
    if approval is None:
        return held
    return {
        **held,
        "deadline": now + approval.timeout_s,
        "on_timeout": approval.on_timeout,
        "timeout": approval.timeout,
    }


def expired(suspension: dict[str, Any] | None, *, now: float) -> Expiry | None:
    """The decision to make now on this suspension, or None (no deadline, or not reached yet)."""
    if not suspension:
        return None
    deadline = suspension.get("deadline")
    if not isinstance(deadline, int | float) or isinstance(deadline, bool) or now < deadline:
        return None
    on_timeout = suspension.get("on_timeout")
    decision: Literal["approved", "rejected"] = "approved" if on_timeout == "approve" else "rejected"
    timeout = suspension.get("timeout") or "its timeout"
    return Expiry(
        decision=decision,
        notes=f"no reviewer decided within {timeout}: {decision} by the system (onTimeout: "
        f"{'approve' if decision == 'approved' else 'reject'})",
    )


__all__ = ["SYSTEM_DECIDER", "Expiry", "expired", "stamp"]
