"""`PostgresStore`'s delivery records and served runtimes (mixed into it).

The compare-and-set on `version` is one `UPDATE ... WHERE version = $n`, atomic across replicas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_runtime.oe.store.deliveries import DeliveryRecord, ServedRuntime

if TYPE_CHECKING:
    import asyncpg

_INSERT_DELIVERY = (
    "INSERT INTO deliveries (key, open, due, version, record) VALUES ($1, $2, $3, $4, $5) "
    "ON CONFLICT (key) DO NOTHING"
)
_GET_DELIVERY = "SELECT record FROM deliveries WHERE key = $1"
_REPLACE_DELIVERY = (
    "UPDATE deliveries SET open = $1, due = $2, version = $3, record = $4 WHERE key = $5 AND version = $6"
)
_LIST_OPEN = "SELECT record FROM deliveries WHERE open ORDER BY due, key LIMIT $1"
_LIST_DUE = "SELECT record FROM deliveries WHERE open AND due <= $1 ORDER BY due, key LIMIT $2"
_NOTE_RUNTIME = (
    "INSERT INTO served_runtimes (execution_id, component, address, record) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT DO NOTHING"
)
_LIST_RUNTIMES = "SELECT record FROM served_runtimes WHERE execution_id = $1 ORDER BY id"


class PostgresDeliveries:
    """Delivery records (`deliveries`) and served runtimes (`served_runtimes`)."""

    if TYPE_CHECKING:

        async def _execute(self, sql: str, *args: Any) -> str: ...

        async def _fetchval(self, sql: str, *args: Any) -> Any: ...

        async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]: ...

    async def create_delivery(self, record: DeliveryRecord) -> DeliveryRecord | None:
        done = await self._execute(
            _INSERT_DELIVERY,
            record.key,
            record.open,
            float(record.due),
            record.version,
            record.model_dump_json(),
        )
        if done.endswith(" 1"):
            return None
        text = await self._fetchval(_GET_DELIVERY, record.key)
        return None if text is None else DeliveryRecord.model_validate_json(text)

    async def get_delivery(self, key: str) -> DeliveryRecord | None:
        text = await self._fetchval(_GET_DELIVERY, key)
        return None if text is None else DeliveryRecord.model_validate_json(text)

    async def replace_delivery(self, record: DeliveryRecord) -> DeliveryRecord | None:
        stored = record.model_copy(update={"version": record.version + 1})
        done = await self._execute(
            _REPLACE_DELIVERY,
            stored.open,
            float(stored.due),
            stored.version,
            stored.model_dump_json(),
            record.key,
            record.version,
        )
        return stored if done.endswith(" 1") else None

    async def list_deliveries(self, *, due_by: float | None = None, limit: int = 100) -> list[DeliveryRecord]:
        if due_by is None:
            rows = await self._fetch(_LIST_OPEN, limit)
        else:
            rows = await self._fetch(_LIST_DUE, float(due_by), limit)
        return [DeliveryRecord.model_validate_json(row[0]) for row in rows]

    async def note_runtime(self, runtime: ServedRuntime) -> bool:
        done = await self._execute(
            _NOTE_RUNTIME, runtime.execution_id, runtime.component, runtime.address, runtime.model_dump_json()
        )
        return done.endswith(" 1")

    async def list_runtimes(self, execution_id: str) -> list[ServedRuntime]:
        rows = await self._fetch(_LIST_RUNTIMES, execution_id)
        return [ServedRuntime.model_validate_json(row[0]) for row in rows]
