"""The queue of `onLimit: queue` (issue 34), as pure decisions: who is next, and what a full slot blocks.

Executions over `maxConcurrentExecutions` wait `queued` and start oldest first (created_at, then id) as
slots free. A full Agent-wide limit holds back every later execution of that Agent (first in, first
out); a full per-user limit holds back only that user's, the others go on in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from agent_runtime.oe.limits import Refusal
from agent_runtime.oe.store.base import ExecutionRecord


class Admission(StrEnum):
    START = "start"  # a slot is free: start it now
    AGENT_FULL = "agent_full"  # the Agent's limit is reached: nobody after it starts either
    USER_FULL = "user_full"  # its user's limit is reached: it waits, others of the Agent may start


def fifo(queued: Iterable[ExecutionRecord]) -> list[ExecutionRecord]:
    """Oldest first: the order in which queued executions start."""
    return sorted(queued, key=lambda record: (record.created_at, record.execution_id))


def admission(refusal: Refusal | None) -> Admission:
    """What the concurrency check says of the next queued execution."""
    if refusal is None:
        return Admission.START
    if refusal.limit == "maxConcurrentExecutionsPerUser":
        return Admission.USER_FULL
    return Admission.AGENT_FULL
