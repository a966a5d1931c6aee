"""Execution states and the transitions between them (OE-03), as data and pure functions."""

from __future__ import annotations

from agent_runtime.protocol import TERMINAL_STATES, ExecutionState

S = ExecutionState

# Which states each target may be entered from; every other move is refused.
ENTER_FROM: dict[ExecutionState, frozenset[ExecutionState]] = {
    S.PENDING: frozenset({S.QUEUED}),  # admitted from the queue (oe/admissions.py)
    S.RUNNING: frozenset({S.PENDING, S.SUSPENDED}),
    S.SUSPENDED: frozenset({S.RUNNING}),
    S.COMPLETED: frozenset({S.RUNNING}),
    S.FAILED: frozenset({S.PENDING, S.RUNNING}),
    S.CANCELLED: frozenset({S.QUEUED, S.PENDING, S.RUNNING, S.SUSPENDED}),
}

# Event types that end an execution's event stream.
FINAL_EVENTS = frozenset(state.value for state in TERMINAL_STATES)


def is_terminal(state: ExecutionState) -> bool:
    return state in TERMINAL_STATES
