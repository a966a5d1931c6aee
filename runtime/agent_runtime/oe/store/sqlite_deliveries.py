"""`SqliteStore`'s delivery records and served runtimes (mixed into it; runs on its worker thread)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agent_runtime.oe.store.deliveries import DeliveryRecord, ServedRuntime

T = TypeVar("T")

DELIVERY_SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    key TEXT PRIMARY KEY,
    open INTEGER NOT NULL,
    due REAL NOT NULL,
    version INTEGER NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_by_due ON deliveries (open, due);
CREATE TABLE IF NOT EXISTS served_runtimes (
    execution_id TEXT NOT NULL,
    component TEXT NOT NULL,
    address TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (execution_id, component, address)
);
"""

_INSERT_DELIVERY = (
    "INSERT INTO deliveries (key, open, due, version, record) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (key) DO NOTHING"
)
_GET_DELIVERY = "SELECT record FROM deliveries WHERE key = ?"
# Compare-and-set on the version the writer read: a concurrent writer's answers are never overwritten.
_REPLACE_DELIVERY = (
    "UPDATE deliveries SET open = ?, due = ?, version = ?, record = ? WHERE key = ? AND version = ?"
)
_LIST_OPEN = "SELECT record FROM deliveries WHERE open = 1 ORDER BY due, key LIMIT ?"
_LIST_DUE = "SELECT record FROM deliveries WHERE open = 1 AND due <= ? ORDER BY due, key LIMIT ?"
_NOTE_RUNTIME = (
    "INSERT INTO served_runtimes (execution_id, component, address, record) VALUES (?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING"
)
_LIST_RUNTIMES = "SELECT record FROM served_runtimes WHERE execution_id = ? ORDER BY rowid"


class SqliteDeliveries:
    """Delivery records (`deliveries`) and served runtimes (`served_runtimes`) in the store's file."""

    if TYPE_CHECKING:

        async def _run(self, fn: Callable[..., T], *args: Any) -> T: ...

        def _db(self) -> sqlite3.Connection: ...

        def _execute(self, sql: str, params: tuple[Any, ...]) -> int: ...

        def _fetchone(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None: ...

        def _fetchall(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]: ...

    async def create_delivery(self, record: DeliveryRecord) -> DeliveryRecord | None:
        params = (record.key, int(record.open), record.due, record.version, record.model_dump_json())
        return await self._run(self._create_delivery, params)

    def _create_delivery(self, params: tuple[Any, ...]) -> DeliveryRecord | None:
        db = self._db()
        if db.execute(_INSERT_DELIVERY, params).rowcount == 1:
            return None
        row = db.execute(_GET_DELIVERY, (params[0],)).fetchone()
        return DeliveryRecord.model_validate_json(row[0])

    async def get_delivery(self, key: str) -> DeliveryRecord | None:
        row = await self._run(self._fetchone, _GET_DELIVERY, (key,))
        return None if row is None else DeliveryRecord.model_validate_json(row[0])

    async def replace_delivery(self, record: DeliveryRecord) -> DeliveryRecord | None:
        stored = record.model_copy(update={"version": record.version + 1})
        params = (
            int(stored.open),
            stored.due,
            stored.version,
            stored.model_dump_json(),
            record.key,
            record.version,
        )
        return stored if await self._run(self._execute, _REPLACE_DELIVERY, params) == 1 else None

    async def list_deliveries(self, *, due_by: float | None = None, limit: int = 100) -> list[DeliveryRecord]:
        if due_by is None:
            rows = await self._run(self._fetchall, _LIST_OPEN, (limit,))
        else:
            rows = await self._run(self._fetchall, _LIST_DUE, (float(due_by), limit))
        return [DeliveryRecord.model_validate_json(row[0]) for row in rows]

    async def note_runtime(self, runtime: ServedRuntime) -> bool:
        params = (runtime.execution_id, runtime.component, runtime.address, runtime.model_dump_json())
        return await self._run(self._execute, _NOTE_RUNTIME, params) == 1

    async def list_runtimes(self, execution_id: str) -> list[ServedRuntime]:
        rows = await self._run(self._fetchall, _LIST_RUNTIMES, (execution_id,))
        return [ServedRuntime.model_validate_json(row[0]) for row in rows]
