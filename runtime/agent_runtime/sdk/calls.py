"""What a tool call knows about itself, and what a resumed run was told up front.

- `idempotency_key()`: inside a tool body (in the Tool Pod or, for a local tool, in the AER), the key of the
  call being run, `<execution_id>:<step>`. It is the same every time the platform runs or replays that
  step, so a tool that sends it to its provider (an `Idempotency-Key` header) lets the provider refuse a
  second copy whatever happens upstream.
- Agent-level `app.suspend` (B-09): agent code calls it synchronously, so on a resumed run its answer (the
  human's decision) must already be here: the OE sends it with the run (`suspend_replies`). The step is
  still the OE's: the SDK confirms it with `/tool/execute` before the run's next call or its end, and the
  OE answers it from its replay cache (or fails the execution if the replay diverged).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from agent_runtime.connectors.call_key import CALL
from agent_runtime.protocol import SuspendReply, ToolExecuteRequest

# The connectors' own variable (connectors/call_key.py): a connector the Tool Pod runs sees the same call.
_call_var = CALL


@contextlib.contextmanager
def call_scope(execution_id: str | None, step: int | None) -> Iterator[None]:
    """Mark the block as the body of the call at `(execution_id, step)`; nothing when either is unknown."""
    token = _call_var.set((execution_id, step) if execution_id and step else None)
    try:
        yield
    finally:
        _call_var.reset(token)


def current_call() -> tuple[str, int] | None:
    """`(execution_id, step)` of the governed call whose body runs here, or None outside one."""
    return _call_var.get()


def idempotency_key() -> str:
    """`<execution_id>:<step>` of the tool call running here; RuntimeError outside a tool body."""
    call = _call_var.get()
    if call is None:
        raise RuntimeError(
            "idempotency_key() is only known inside a tool body the platform runs (a call with an "
            "execution and a step); call it from the tool, not from agent code or at import time"
        )
    return f"{call[0]}:{call[1]}"


@dataclass
class ResumeState:
    """One run's answers to agent-level `app.suspend` calls, and the confirmations still owed to the OE."""

    replies: dict[int, SuspendReply] = field(default_factory=dict)
    unconfirmed: list[tuple[ToolExecuteRequest, SuspendReply]] = field(default_factory=list)
    _lock: asyncio.Lock | None = field(default=None, repr=False)

    def lock(self) -> asyncio.Lock:
        """Held while confirmations are sent: a call made meanwhile waits for them."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock


_resume_var: ContextVar[ResumeState | None] = ContextVar("agent_runtime_resume", default=None)


@contextlib.contextmanager
def resume_scope(replies: Iterable[SuspendReply]) -> Iterator[ResumeState]:
    """The run's answers to its agent-level suspensions; every task and thread of the run shares it."""
    state = ResumeState(replies={reply.step: reply for reply in replies})
    token = _resume_var.set(state)
    try:
        yield state
    finally:
        _resume_var.reset(token)


def resume_state() -> ResumeState | None:
    return _resume_var.get()
