"""The OE's side of the tamper-evident audit (issue 34): sign each execution's chain head after an append,
copy each record to the export stream (oe/audit_export.py: JSONL, OTLP logs), verify an execution's chain
on request.

The chain and its checks are agent_runtime/audit_chain.py (shared with the CLI's offline verify); the store
links the records (`Store.append_audit`); the signing key is the OE's own (its Secret), which the store
never holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_runtime.audit_chain import Verdict, load_public_keys, signed_head, verify
from agent_runtime.oe.audit_export import EXPORT_FILE_ENV, AuditExport, JsonlExport, export_from_env
from agent_runtime.oe.store.base import AuditRecord, Store

# Re-exported: the engine and the OE server import the export stream from here.
__all__ = [
    "EXPORT_FILE_ENV",
    "AuditExport",
    "AuditLedger",
    "JsonlExport",
    "LedgeredStore",
    "Signer",
    "export_from_env",
]

Signer = Callable[[bytes], tuple[str, bytes]]


class LedgeredStore:
    """A `Store` whose every audit append (the engine's, the drains') is followed by its signed head."""

    def __init__(self, inner: Store, ledger: AuditLedger) -> None:
        self._inner = inner
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def append_audit(self, record: AuditRecord) -> AuditRecord:
        stored = await self._inner.append_audit(record)
        await self._ledger.appended(stored)
        return stored


class AuditLedger:
    def __init__(
        self,
        store: Store,
        *,
        signer: Callable[[], Signer | None] = lambda: None,
        public_keys: Callable[[], tuple[str, ...]] = tuple,
        export: AuditExport | None = None,
    ) -> None:
        self._store = store
        self._signer = signer
        self._public_keys = public_keys
        self._export = export

    async def appended(self, record: AuditRecord | None) -> None:
        """After the store linked `record`: sign and keep the new head, then export both."""
        if record is None or record.seq is None or record.hash is None:
            return  # a store without the chain
        head = signed_head(record.execution_id, seq=record.seq, digest=record.hash, sign=self._signer())
        await self._store.set_audit_head(record.execution_id, head)
        if self._export is not None:
            self._export.write(record.model_dump(mode="json"))
            self._export.write({"head": head})

    async def verify(self, execution_id: str) -> Verdict:
        records = [record.model_dump(mode="json") for record in await self._store.list_audit(execution_id)]
        head = await self._store.get_audit_head(execution_id)
        keys = load_public_keys(self._public_keys())
        return verify(records, head=head, public_keys=keys, execution_id=execution_id)

    def public_keys(self) -> tuple[str, ...]:
        return self._public_keys()

    def wrap(self, store: Store) -> Store:
        """`store` with this ledger signing the head after each audit append."""
        return LedgeredStore(store, self)  # type: ignore[return-value]
