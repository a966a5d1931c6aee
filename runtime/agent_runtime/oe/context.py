"""What every part of the engine shares: the store, the registrations, the runtimes, the event bus, the
clock, and the secrets the OE knows (issue 42). The parts read `store` here on every use, so wrapping it
(the metrics' `ObservedStore`) reaches all of them at once."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from agent_runtime.oe.events import EventBus
from agent_runtime.oe.observer import NullObserver, Observer
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.runtimes import Runtimes
from agent_runtime.oe.store.base import ExecutionRecord, Store
from agent_runtime.oe.stream_settings import StreamSettings
from agent_runtime.protocol import CallError, CallOutcome, ExecutorCallback
from agent_runtime.redaction import Redactor, redacted_error, redactor_for


class Registrations(Protocol):
    """What the engine needs of the registry: an Agent's registration by name."""

    def get(self, agent: str) -> AgentRegistration | None: ...


@dataclass
class Secrets:
    """Every value the OE knows as a secret: each Agent's tokens and the OE's own (its client token)."""

    known: Callable[[], Iterable[str]] = tuple

    @staticmethod
    def of(reg: AgentRegistration) -> tuple[str, ...]:
        return reg.tokens()  # the previous one too, while a rotation's grace period lasts

    def all(self, reg: AgentRegistration) -> tuple[str, ...]:
        return (*reg.tokens(), *self.known())

    def redactor(self, caller: AgentRegistration) -> Redactor:
        """Every value the OE knows as a secret for this caller: its tokens and the OE's client token."""
        return redactor_for(self.all(caller))

    def scrubbed(self, outcome: CallOutcome, caller: AgentRegistration) -> CallOutcome:
        """The outcome without any value the OE knows as a secret (in any encoding), before it is stored
        (step, replay cache) or forwarded (the AER, the model's next request)."""
        redactor = self.redactor(caller)
        result = redactor.value(outcome.result)
        error = redacted_error(outcome.error, redactor) if outcome.error is not None else None
        if result is outcome.result and error is outcome.error:
            return outcome
        return outcome.model_copy(update={"result": result, "error": error})

    def scrubbed_callback(self, report: ExecutorCallback, caller: AgentRegistration) -> ExecutorCallback:
        """The same for an execution's end: its result, error and suspension metadata."""
        redactor = self.redactor(caller)
        error: CallError | None = redacted_error(report.error, redactor) if report.error is not None else None
        update = {
            "result": redactor.value(report.result),
            "error": error,
            "metadata": redactor.value(report.metadata),
        }
        if all(update[name] is getattr(report, name) for name in update):
            return report
        return report.model_copy(update=update)


@dataclass
class EngineContext:
    store: Store
    registry: Registrations
    runtimes: Runtimes
    events: EventBus
    clock: Callable[[], float]
    instance_id: str
    secrets: Secrets
    streaming: StreamSettings
    observer: Observer = field(default_factory=NullObserver)
    # Execution -> when the watchdog first could not reach its AER (a restart gets that long).
    unreachable: dict[str, float] = field(default_factory=dict)
    # Told the Agent whose execution ended, was cancelled or failed: a queued one may start (admissions).
    slot_freed: Callable[[str], None] = field(default=lambda agent: None)
    # Told every execution that ended or suspended: a parent held on its child may go on (oe/children.py).
    settled: Callable[[ExecutionRecord], None] = field(default=lambda record: None)
