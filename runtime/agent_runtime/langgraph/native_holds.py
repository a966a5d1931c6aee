"""LangGraph's own pauses as held steps in the OE (issue 31): `interrupt(value)` and static breakpoints.

- A node's `interrupt(value)` stops the graph with the interrupt pending in the checkpoint. The AER then
  holds it in the OE as an agent-level step of kind `interrupt` whose payload is the value (audited and
  shown to reviewers like any hold) and the execution is SUSPENDED. Resumed, the graph continues with
  `Command(resume={interrupt_id: value})`, the reviewer's `value`, so `interrupt()` returns it. Several
  interrupts (in one node, or in parallel tasks) are held one at a time, in LangGraph's order.
- `interrupt_before` / `interrupt_after` stop the graph with tasks still to run and no interrupt: held as
  kind `breakpoint` (payload: the nodes to run next); an approval continues the graph (`ainvoke(None)`).
- A rejected interrupt resumes the graph too: the node's `interrupt()` raises `InterruptRejected` with the
  reviewer's notes (interrupt_rejection.py), which the node may catch and take another branch.
- A rejected breakpoint discards the pending task (so the thread's next turn runs) and ends the turn with
  `HoldRejected`, which names the hold and carries the reviewer's notes.

The step the hold took, its arguments (for the OE's replay check) and the interrupt it answers are saved
with the step ledger (steps.py), so a resumed run answers exactly that interrupt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_jsonable_python

from agent_runtime.langgraph.interrupt_rejection import rejection_value
from agent_runtime.protocol import AGENT_SUSPEND, SuspendReply, ToolExecuteRequest

INTERRUPT = "interrupt"
BREAKPOINT = "breakpoint"


class HoldRejected(RuntimeError):
    """A reviewer rejected the graph's interrupt or breakpoint; the turn ends, the thread stays usable."""


@dataclass(frozen=True)
class Hold:
    """One pause of the graph the OE is to hold."""

    kind: str
    reason: str
    payload: Any
    interrupt_id: str | None = None

    def args(self) -> dict[str, Any]:
        """The held step's arguments (what the OE fingerprints and shows)."""
        return {"reason": self.reason, "payload": self.payload, "kind": self.kind}


def pending_hold(state: Any) -> Hold | None:
    """The graph's first pause in a `StateSnapshot` (interrupts before breakpoints); None if it ended."""
    interrupts = tuple(getattr(state, "interrupts", ()) or ())
    if interrupts:
        first = interrupts[0]
        return Hold(
            kind=INTERRUPT,
            reason="interrupt",
            payload=to_jsonable_python(first.value, fallback=repr),
            interrupt_id=str(first.id),
        )
    nodes = [str(node) for node in (getattr(state, "next", ()) or ())]
    if nodes:
        return Hold(kind=BREAKPOINT, reason=f"breakpoint before {', '.join(nodes)}", payload={"next": nodes})
    return None


def hold_request(hold: Hold, *, execution_id: str, step: int) -> ToolExecuteRequest:
    return ToolExecuteRequest(execution_id=execution_id, step=step, tool=AGENT_SUSPEND, args=hold.args())


def hold_record(hold: Hold, *, step: int) -> dict[str, Any]:
    """What the ledger keeps of the hold for the resumed run."""
    return {"step": step, "kind": hold.kind, "args": hold.args(), "interrupt_id": hold.interrupt_id}


def resume_value(holding: Mapping[str, Any], reply: SuspendReply) -> Any:
    """The graph input that continues past a decided hold: `Command(resume=...)` or None.

    A rejected interrupt resumes with the marker its `interrupt()` raises on; a rejected breakpoint raises
    `HoldRejected` here."""
    from langgraph.types import Command

    if holding.get("kind") == INTERRUPT and holding.get("interrupt_id") and reply.decision != "approved":
        marker = rejection_value(notes=reply.reviewer_notes, step=int(holding["step"]))
        return Command(resume={str(holding["interrupt_id"]): marker})
    if reply.decision != "approved":
        notes = f": {reply.reviewer_notes}" if reply.reviewer_notes else ""
        raise HoldRejected(
            f"the reviewer rejected the graph's {holding.get('kind')} at step {holding['step']}{notes}"
        )
    if holding.get("kind") == INTERRUPT and holding.get("interrupt_id"):
        return Command(resume={str(holding["interrupt_id"]): reply.value})
    return None
