"""What an agentRef call makes of its child execution (issue 38), as pure functions: the child's input,
the key that makes its start happen once, whether it may be started, and what the parent's step answers
once the child has settled (its result, its error, or a hold of the parent's own). `oe/children.py` does
the I/O around them; the unit tests call these directly."""

from __future__ import annotations

from typing import Any

from agent_runtime.oe.audit import redact_value
from agent_runtime.oe.holds import CHILD
from agent_runtime.oe.store.base import ExecutionRecord, ParentLink
from agent_runtime.protocol import TERMINAL_STATES, CallError, CallOutcome, ExecutionState

S = ExecutionState

# How deep children may nest: a child's child's ... at depth MAX_DEPTH may not start another one, so an
# Agent that names itself (or two that name each other) cannot start executions without end.
MAX_DEPTH = 4
# Where waiting on a child stops (the child still runs): before the AER's own call to the OE gives up
# (600 s, sdk/oe_client.py). The parent then holds until the child ends.
DEFAULT_WAIT_S = 300.0
# The parent's step settles when its child is in one of these states.
SETTLED = frozenset({*TERMINAL_STATES, S.SUSPENDED})

FORBIDDEN = "agent_ref_forbidden"
UNKNOWN = "agent_ref_unknown"
TOO_DEEP = "agent_ref_too_deep"
CHILD_FAILED = "child_failed"
CHILD_CANCELLED = "child_cancelled"
# Who a parent's hold is lifted by, in its review: the child's end, never a person.
CHILD_DECIDER = "agent-engine:child-execution"
# Who cancels a child whose parent was cancelled (or ended while it waited on the child).
PARENT_DECIDER = "agent-engine:parent-execution"


def claim_key(parent_execution_id: str, step: int) -> str:
    """The idempotency key of the child start at one parent step (unique in every store: a claim)."""
    return f"child:{parent_execution_id}:{step}"


def child_input(args: dict[str, Any]) -> Any:
    """The child's input: the call's `input` argument, or the arguments themselves when it has none."""
    return args["input"] if set(args) == {"input"} else args


def link(parent: ExecutionRecord, step: int) -> ParentLink:
    depth = parent.parent.depth + 1 if parent.parent is not None else 1
    return ParentLink(execution_id=parent.execution_id, step=step, agent=parent.agent, depth=depth)


def error(category: str, explanation: str) -> CallOutcome:
    return CallOutcome(status="error", error=CallError(category=category, explanation=explanation))


def refusal(parent: ExecutionRecord, *, target: str, known: bool, allowed: bool) -> CallOutcome | None:
    """Why this child may not start, as the parent's tool error; None when it may."""
    if not known:
        return error(
            UNKNOWN, f"no Agent {target!r} is registered with this Orchestration Engine: check the agentRef"
        )
    if parent.parent is not None and parent.parent.depth >= MAX_DEPTH:
        return error(
            TOO_DEEP,
            f"this execution is a child {parent.parent.depth} levels deep; an agentRef call starts no "
            f"child below depth {MAX_DEPTH}",
        )
    if not allowed:
        who = parent.invoked_by.username if parent.invoked_by is not None else "nobody recorded"
        namespace, name = target.split("/", 1)
        return error(
            FORBIDDEN,
            f"the user who started this execution ({who}) may not invoke Agent {target!r}: a child runs as "
            f"its parent's user, who needs create on agents/invoke ({name!r} in namespace {namespace!r}), "
            "as POST /invoke does",
        )
    return None


def settled_outcome(
    child: ExecutionRecord, *, call_args: dict[str, Any], secrets: tuple[str, ...]
) -> CallOutcome:
    """What the parent's step answers for a child in `SETTLED` (or still running after the wait)."""
    if child.status is S.COMPLETED:
        return CallOutcome(status="success", result=child.result)
    if child.status is S.FAILED:
        cause = child.error
        why = f"{cause.category}: {cause.explanation}" if cause is not None else "no error recorded"
        return error(CHILD_FAILED, f"child execution {child.execution_id} of {child.agent} failed: {why}")
    if child.status is S.CANCELLED:
        return error(CHILD_CANCELLED, f"child execution {child.execution_id} of {child.agent} was cancelled")
    return CallOutcome(status="suspend", result=hold(child, call_args=call_args, secrets=secrets))


def hold(child: ExecutionRecord, *, call_args: dict[str, Any], secrets: tuple[str, ...]) -> dict[str, Any]:
    """The parent's own hold while its child waits for a human (or still runs): it names the child and
    the child's held call, the way a reviewer finds it in the child's own review."""
    held = redact_value(child.suspension or {}, secrets=secrets) if child.status is S.SUSPENDED else {}
    asks = {key: held[key] for key in ("kind", "step", "tool", "args", "reason") if key in held}
    if child.status is S.SUSPENDED:
        what = f"{asks.get('tool', 'a call')} at step {asks.get('step', '?')}"
        reason = (
            f"child execution {child.execution_id} of {child.agent} waits for a human ({what}): decide "
            "it in the child's own review; this execution goes on with the child's answer"
        )
    else:
        reason = (
            f"child execution {child.execution_id} of {child.agent} is still {child.status.value}; this "
            "execution goes on with its answer when it ends"
        )
    payload: dict[str, Any] = {
        "child_execution_id": child.execution_id,
        "child_agent": child.agent,
        "child_status": child.status.value,
    }
    if asks:
        payload["held"] = asks
    return {"kind": CHILD, "reason": reason, "args": call_args, "payload": payload}


def waited_child(suspension: dict[str, Any] | None) -> str | None:
    """The child execution a parent's hold waits on, or None when it is another kind of hold."""
    held = suspension or {}
    payload = held.get("payload")
    if held.get("kind") != CHILD or not isinstance(payload, dict):
        return None
    child = payload.get("child_execution_id")
    return child if isinstance(child, str) else None


def lifts(parent: ExecutionRecord, child: ExecutionRecord) -> bool:
    """True when the parent, suspended on exactly this child, is to run its call again: the child ended,
    or it now waits on another call than the parent's hold names (its reviewer decided, and it held again;
    or it was still running and is held now). The call run again answers the child's end or holds anew."""
    if parent.status is not S.SUSPENDED or waited_child(parent.suspension) != child.execution_id:
        return False
    if child.status in TERMINAL_STATES:
        return True
    if child.status is not S.SUSPENDED:
        return False
    payload = (parent.suspension or {}).get("payload") or {}
    named = payload.get("held") or {}
    now = child.suspension or {}
    return (named.get("step"), named.get("tool")) != (now.get("step"), now.get("tool"))


def orphaned(parent: ExecutionRecord | None, child: ExecutionRecord) -> bool:
    """True when the child is to be cancelled: its parent ended (cancelled, or failed while waiting on it)
    and the child has not."""
    gone = parent is None or parent.status in TERMINAL_STATES
    return gone and child.status not in TERMINAL_STATES


def step_detail(child_id: str, target: str, status: str) -> dict[str, Any]:
    """The parent's step audit record names the child."""
    return {"child_execution_id": child_id, "child_agent": target, "child_status": status}
