"""Which governed call a connector runs for: `(execution_id, step)`, the same every time the platform runs
or replays that step. The Tool Pod sets it around each call (`sdk.calls.call_scope` shares this variable),
so a connector can send a provider a key that makes a resent call one call: the `agent` type's A2A
message id (issue 38)."""

from __future__ import annotations

import uuid
from contextvars import ContextVar

CALL: ContextVar[tuple[str, int] | None] = ContextVar("agent_runtime_call", default=None)

# Message ids are derived, not the key itself: the remote agent learns no execution id of ours.
_MESSAGES = uuid.UUID("5b0e4f0c-38a2-4a2e-9d1c-0a2a38000038")


def current_call() -> tuple[str, int] | None:
    """`(execution_id, step)` of the governed call running here, or None outside one."""
    return CALL.get()


def message_id(call: tuple[str, int] | None) -> str:
    """An A2A message id for the call: the same for every run of one (execution, step), fresh outside."""
    if call is None:
        return uuid.uuid4().hex
    return uuid.uuid5(_MESSAGES, f"{call[0]}:{call[1]}").hex
