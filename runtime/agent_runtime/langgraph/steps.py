"""Deterministic step numbers for LangGraph runs that resume from a checkpoint (Decision 4).

The OE answers a resumed run from its replay cache by `(execution_id, step)` and checks each call's
fingerprint, so every call a resumed run makes again must get the number it had. A LangGraph resume does
not re-run the turn from the start: it re-runs only the tasks of the interrupted super-step. So numbers
are kept per LangGraph task: the ledger records which steps each task took, and when the run suspends
the AER saves that record with the checkpoint (a pending write under a task id LangGraph never
schedules). The resumed run gives each re-run task its recorded numbers first, in order, and new calls
continue after the highest number ever given.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.config import get_config

# LangGraph's own configurable key for the running task's id (langgraph._internal._constants).
_TASK_ID_KEY = "__pregel_task_id"
LEDGER_CHANNEL = "__agent_engine_steps__"
LEDGER_TASK_PREFIX = "agent-engine:steps:"


def current_task_id() -> str | None:
    """The id of the LangGraph task running this code, or None outside one."""
    try:
        config = get_config()
    except RuntimeError:
        return None
    task_id = (config.get("configurable") or {}).get(_TASK_ID_KEY)
    return task_id if isinstance(task_id, str) else None


class StepLedger:
    """Hands out step numbers and remembers which task took which."""

    def __init__(
        self, *, execution_id: str, next_step: int = 1, reserved: Mapping[str, Sequence[int]] | None = None
    ) -> None:
        self.execution_id = execution_id
        self._next = next_step
        self._reserved = {task: deque(steps) for task, steps in (reserved or {}).items()}
        self._taken: dict[str, list[int]] = {}
        # The graph's own pause the OE holds (native_holds.py), for the resumed run to answer.
        self.holding: dict[str, Any] | None = None

    @property
    def next_step(self) -> int:
        return self._next

    def allocate(self) -> int:
        """The step for a call made now: the task's recorded number when it is re-run, else a new one."""
        task = current_task_id()
        queue = self._reserved.get(task) if task is not None else None
        if queue:
            step = queue.popleft()
        else:
            step = self._next
            self._next += 1
        if task is not None:
            self._taken.setdefault(task, []).append(step)
        return step

    def record(self) -> dict[str, Any]:
        """What a resume needs: the next new number and, per task, the numbers it takes in order."""
        tasks = {task: list(steps) for task, steps in self._taken.items()}
        for task, left in self._reserved.items():
            # A task that has not run again (or not to the end) keeps what it had not yet taken back.
            tasks[task] = tasks.get(task, []) + list(left)
        record: dict[str, Any] = {"execution_id": self.execution_id, "next_step": self._next, "tasks": tasks}
        if self.holding is not None:
            record["holding"] = self.holding
        return record

    @classmethod
    def from_pending_writes(
        cls, pending_writes: Sequence[tuple[str, str, Any]] | None, *, execution_id: str
    ) -> StepLedger | None:
        """The ledger the suspended run of `execution_id` saved with the checkpoint, if any."""
        best: dict[str, Any] | None = None
        for task_id, channel, value in pending_writes or ():
            if channel != LEDGER_CHANNEL or not str(task_id).startswith(LEDGER_TASK_PREFIX):
                continue
            if not isinstance(value, Mapping) or value.get("execution_id") != execution_id:
                continue
            if best is None or int(value.get("next_step", 0)) > int(best.get("next_step", 0)):
                best = dict(value)
        if best is None:
            return None
        tasks = best.get("tasks") if isinstance(best.get("tasks"), Mapping) else {}
        ledger = cls(
            execution_id=execution_id,
            next_step=int(best["next_step"]),
            reserved={str(task): [int(s) for s in steps] for task, steps in tasks.items()},
        )
        holding = best.get("holding")
        ledger.holding = dict(holding) if isinstance(holding, Mapping) else None
        return ledger

    def write(self) -> tuple[str, list[tuple[str, Any]]]:
        """`(task_id, writes)` to save this ledger with a checkpoint via `put_writes`."""
        # A fresh task id per save: some savers keep the first write of a (task, index) and drop repeats.
        return f"{LEDGER_TASK_PREFIX}{self._next:010d}", [(LEDGER_CHANNEL, self.record())]
