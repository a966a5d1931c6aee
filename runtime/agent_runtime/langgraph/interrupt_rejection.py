"""A rejected `interrupt()` raises inside the node (issue 31): `InterruptRejected`, which the node may catch.

LangGraph's `interrupt(value)` returns the resume value it finds for the task; it has no notion of a
refusal. So a reviewer's `rejected` on a native interrupt resumes the graph with a marker value
(`{REJECTED_KEY: {"notes": ..., "step": ...}}`), and the platform's own `interrupt` (installed over
`langgraph.types.interrupt`, see `install`) calls LangGraph's and raises `InterruptRejected` when it
returns that marker. A node that catches it takes another branch; uncaught, it ends the turn FAILED
(the agent then discards the pending task, so the thread's next turn runs).

`install` replaces `langgraph.types.interrupt` and every module-level name already bound to LangGraph's
function outside LangGraph itself (the entrypoint's `from langgraph.types import interrupt` ran before the
first build), once per process. The marker is JSON, so it survives the checkpoint like any resume value,
and a re-run of the task raises again at the same `interrupt()`, as LangGraph replays resume values.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

REJECTED_KEY = "__agent_engine_interrupt_rejected__"
_installed: list[Any] = []


class InterruptRejected(RuntimeError):
    """The reviewer rejected this `interrupt()`; `notes` are the reviewer's notes, `step` the held step."""

    def __init__(self, message: str, *, notes: str | None, step: int) -> None:
        super().__init__(message)
        self.notes = notes
        self.step = step


def rejection_value(*, notes: str | None, step: int) -> dict[str, Any]:
    """The resume value that makes the held `interrupt()` raise `InterruptRejected`."""
    return {REJECTED_KEY: {"notes": notes, "step": step}}


def rejection_in(answer: Any) -> InterruptRejected | None:
    """The exception a resume value stands for (None: it is the reviewer's value)."""
    if not isinstance(answer, Mapping) or set(answer) != {REJECTED_KEY}:
        return None
    body = answer[REJECTED_KEY] if isinstance(answer[REJECTED_KEY], Mapping) else {}
    notes = body.get("notes")
    step = int(body.get("step") or 0)
    said = f": {notes}" if notes else ""
    return InterruptRejected(
        f"the reviewer rejected the graph's interrupt at step {step}{said}", notes=notes, step=step
    )


def _governed(original: Any) -> Any:
    def interrupt(value: Any, *args: Any, **kwargs: Any) -> Any:
        answer = original(value, *args, **kwargs)
        rejected = rejection_in(answer)
        if rejected is not None:
            raise rejected
        return answer

    interrupt.__doc__ = original.__doc__
    interrupt.__wrapped__ = original  # type: ignore[attr-defined]
    return interrupt


def install() -> Any:
    """Put the platform's `interrupt` in place of LangGraph's, once per process; returns it."""
    if _installed:
        return _installed[0]
    import langgraph.types

    original = langgraph.types.interrupt
    governed = _governed(original)
    _installed.append(governed)
    langgraph.types.interrupt = governed
    for name, module in list(sys.modules.items()):
        if module is None or name == "langgraph" or name.startswith("langgraph."):
            continue
        try:
            namespace = vars(module)
        except TypeError:
            continue
        for attr, bound in list(namespace.items()):
            if bound is original:
                namespace[attr] = governed
    return governed
