"""What the OE tells its metrics: every audit record written (the engine's and the drains'), every
execution failed outside a callback, every human decision and how long it waited.

`ObservedStore` passes each `append_audit` on to an `Observer` after the store has it, so one hook sees
every step (kind, decision, route, cache, error category, latency, tokens, cost), callback, cancel, resume,
restart and drain. The metrics live in servers/oe_metrics.py; the OE imports no server code.
"""

from __future__ import annotations

from typing import Any, Protocol

from agent_runtime.oe.store.base import AuditRecord, Store


class Observer(Protocol):
    def audited(self, record: AuditRecord) -> None: ...

    def execution_failed(self, agent: str, category: str) -> None: ...

    def decided(self, agent: str, decision: str, waited_s: float) -> None: ...


class NullObserver:
    def audited(self, record: AuditRecord) -> None:
        return None

    def execution_failed(self, agent: str, category: str) -> None:
        return None

    def decided(self, agent: str, decision: str, waited_s: float) -> None:
        return None


class ObservedStore:
    """A `Store` whose audit writes are also shown to an `Observer`; everything else is the store's."""

    def __init__(self, inner: Store, observer: Observer) -> None:
        self._inner = inner
        self._observer = observer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def append_audit(self, record: AuditRecord) -> AuditRecord:
        stored = await self._inner.append_audit(record)  # as linked into the audit's hash chain (issue 34)
        self._observer.audited(record)
        return stored
