"""How a runtime tracks the work of a call so that a drain or an interrupt can stop it (DR-09, IC-04).

The registry itself lives with the servers (`servers/drain.py`); the SDK only needs its shape: the AER puts
its registry in `call_tracker_var` for a run, and a local tool body then runs through it, so that
`POST /interrupt/call` can cancel exactly that body and `POST /drain` can wait for it.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

from agent_runtime.protocol import EXECUTION_DRAINED, EXECUTION_DRAINING, INTERRUPTED

T = TypeVar("T")


class ExecutionDraining(Exception):
    """A new call of an execution being drained is refused before anything runs (DR-10)."""

    category = EXECUTION_DRAINING

    def __init__(self, execution_id: str) -> None:
        self.explanation = f"execution {execution_id!r} is being drained here: no new call of it is admitted"
        super().__init__(self.explanation)


class CallInterrupted(Exception):
    """The call's tracked work was cancelled by an interrupt (`interrupted`) or a drain (`execution_drained`).

    It is the call's own final answer (IC-09): recorded as an error, replayed as an error.
    """

    def __init__(self, category: str, explanation: str) -> None:
        super().__init__(explanation)
        self.category = category
        self.explanation = explanation

    @classmethod
    def by_interrupt(cls, execution_id: str, step: int | None) -> CallInterrupted:
        return cls(INTERRUPTED, f"the call at step {step} of execution {execution_id!r} was interrupted")

    @classmethod
    def by_drain(cls, execution_id: str, reason: str) -> CallInterrupted:
        why = f" ({reason})" if reason else ""
        return cls(EXECUTION_DRAINED, f"execution {execution_id!r} was drained{why}; the call was cancelled")


class CallTracker(Protocol):
    """What a tracked call needs of the runtime's registry."""

    def admit(self, execution_id: str, step: int | None, *, cancellable: bool) -> Any:
        """Register the call before it runs; raises ExecutionDraining when its execution is draining."""

    async def run(self, ticket: Any, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` as the ticket's tracked task; raises CallInterrupted when a drain or interrupt
        cancelled it."""


# Set by the AER for the duration of a run; None elsewhere (the Tool Pod tracks in its own services).
call_tracker_var: ContextVar[CallTracker | None] = ContextVar("agent_runtime_call_tracker", default=None)


async def run_tracked(
    tracker: CallTracker | None,
    *,
    execution_id: str | None,
    step: int | None,
    cancellable: bool,
    start: Callable[[], Coroutine[Any, Any, T]],
) -> T:
    """`start()`'s work, tracked when there is a registry and an execution, untracked otherwise. The work is
    created only once admitted, so a refused call runs nothing."""
    if tracker is None or not execution_id:
        return await start()
    ticket = tracker.admit(execution_id, step, cancellable=cancellable)
    return await tracker.run(ticket, start())
