"""Durable records of what the OE must deliver to runtimes (OE-17, OE-18), and which runtimes served what.

- `ServedRuntime`: one pod that answered for an execution (the AER's `/execute`, the Tool Pod's call
  outcomes), with the address it reported (Decision 8). A drain goes to every one of them.
- `DeliveryRecord`: one drain of an execution, or one interrupt of a call, with a target per runtime and
  what each answered. It keeps its `request_id` and `deadline_at_ms` for life, so every retry (by this
  process, another replica, or this OE after a restart) sends exactly the same request.

Writes of a delivery record are compare-and-set on `version`, so two replicas driving it never lose each
other's answers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

DeliveryKind = Literal["drain", "interrupt"]
# open: still being delivered. A drain ends quiet (every runtime answered completed) or unconfirmed
# (some runtime answered otherwise, or never answered in the retry window); an interrupt ends done.
DeliveryState = Literal["open", "quiet", "unconfirmed", "done"]


class ServedRuntime(BaseModel):
    """A pod that served an execution, as it named itself in an answer."""

    execution_id: str
    component: Literal["aer", "tool"]
    address: str  # the pod's base URL, or the Service's when the answer named no pod
    pod_name: str | None = None
    at: float


class DeliveryTarget(BaseModel):
    """One runtime a delivery goes to, and where that stands."""

    component: Literal["aer", "tool"]
    address: str
    pod_name: str | None = None
    outcome: str | None = None  # the last answer's outcome; `expired` when the window closed without one
    reason_code: str | None = None
    final: bool = False  # no more requests go to it
    attempts: int = 0
    problem: str | None = None  # why the last attempt did not count (an HTTP status, an error type)
    next_at: float = 0.0  # epoch seconds of its next attempt
    delay_s: float = 0.0  # the current backoff


class DeliveryRecord(BaseModel):
    """One drain (`key` `drain:<execution>`) or one interrupt (`interrupt:<execution>:<step>`)."""

    key: str
    kind: DeliveryKind
    execution_id: str
    agent: str
    workspace_id: str
    step: int | None = None
    # Interrupts: the runtime kind that runs the call (None when the OE does not know the step yet).
    component: Literal["aer", "tool"] | None = None
    request_id: str
    reason: str = ""
    deadline_at_ms: int | None = None  # drains only: absolute, never moved
    state: DeliveryState = "open"
    outcome: str | None = None
    targets: list[DeliveryTarget] = Field(default_factory=list)
    created_at: float
    retry_until: float
    due: float  # when the caller should look at it next
    updated_at: float
    version: int = 0

    @property
    def open(self) -> bool:
        return self.state == "open"


def drain_key(execution_id: str) -> str:
    return f"drain:{execution_id}"


def interrupt_key(execution_id: str, step: int) -> str:
    return f"interrupt:{execution_id}:{step}"
