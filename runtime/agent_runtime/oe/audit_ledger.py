"""The OE's side of the tamper-evident audit (issue 34): sign each execution's chain head after an append,
copy each record to the export stream, verify an execution's chain on request.

The chain and its checks are agent_runtime/audit_chain.py (shared with the CLI's offline verify); the store
links the records (`Store.append_audit`); the signing key is the OE's own (its Secret), which the store
never holds.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agent_runtime.audit_chain import Verdict, load_public_keys, signed_head, verify
from agent_runtime.oe.store.base import AuditRecord, Store

EXPORT_FILE_ENV = "OE_AUDIT_EXPORT_FILE"
Signer = Callable[[bytes], tuple[str, bytes]]


class JsonlExport:
    """Each audit record as one JSON line appended to a file (a platform team's copy outside the store;
    `agentengine audit verify --file` checks it offline). Heads go in as `{"head": {...}}` lines."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def write(self, line: dict[str, Any]) -> None:
        text = json.dumps(line, separators=(",", ":"), ensure_ascii=False, default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(text)


def export_from_env(env: Mapping[str, str] | None = None) -> JsonlExport | None:
    path = (env if env is not None else os.environ).get(EXPORT_FILE_ENV, "").strip()
    return JsonlExport(path) if path else None


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
        export: JsonlExport | None = None,
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
