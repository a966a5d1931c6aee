"""`MongoStore`'s delivery records and served runtimes (mixed into it).

`deliveries` (`_id` is the record's key; `open`, `due` and `version` are fields for the queries, the record
itself JSON text) and `served_runtimes` (unique `(execution_id, component, address)`). The compare-and-set
on `version` is one single-document update; on FerretDB v1 it is atomic within this process only (see
`mongo.py`), which is what a single OE needs; between replicas a lost write costs a repeated request with the
same request_id, which the runtimes answer idempotently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from pymongo import ASCENDING
from pymongo.errors import DuplicateKeyError

from agent_runtime.oe.store.deliveries import DeliveryRecord, ServedRuntime

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection

Document = dict[str, Any]


def _delivery_doc(record: DeliveryRecord) -> Document:
    return {
        "_id": record.key,
        "open": record.open,
        "due": float(record.due),
        "version": record.version,
        "record": record.model_dump_json(),
    }


class MongoDeliveries:
    """Delivery records and served runtimes next to the store's other collections."""

    if TYPE_CHECKING:

        def _col(self, name: str) -> AsyncCollection[Document]: ...

        def _lock(self, *key: Hashable) -> asyncio.Lock: ...

    async def _create_delivery_indexes(self) -> None:
        await self._col("deliveries").create_index([("open", ASCENDING), ("due", ASCENDING)], name="open_due")
        await self._col("served_runtimes").create_index(
            [("execution_id", ASCENDING), ("component", ASCENDING), ("address", ASCENDING)],
            name="execution_runtime",
            unique=True,
        )

    async def create_delivery(self, record: DeliveryRecord) -> DeliveryRecord | None:
        deliveries = self._col("deliveries")
        try:
            await deliveries.insert_one(_delivery_doc(record))
            return None
        except DuplicateKeyError:
            doc = await deliveries.find_one({"_id": record.key})
        return None if doc is None else DeliveryRecord.model_validate_json(doc["record"])

    async def get_delivery(self, key: str) -> DeliveryRecord | None:
        doc = await self._col("deliveries").find_one({"_id": key})
        return None if doc is None else DeliveryRecord.model_validate_json(doc["record"])

    async def replace_delivery(self, record: DeliveryRecord) -> DeliveryRecord | None:
        stored = record.model_copy(update={"version": record.version + 1})
        doc = _delivery_doc(stored)
        doc.pop("_id")
        async with self._lock("delivery", record.key):
            done = await self._col("deliveries").update_one(
                {"_id": record.key, "version": record.version}, {"$set": doc}
            )
        return stored if done.modified_count == 1 else None

    async def list_deliveries(self, *, due_by: float | None = None, limit: int = 100) -> list[DeliveryRecord]:
        query: Document = {"open": True}
        if due_by is not None:
            query["due"] = {"$lte": float(due_by)}
        found = (
            self._col("deliveries").find(query).sort([("due", ASCENDING), ("_id", ASCENDING)]).limit(limit)
        )
        return [DeliveryRecord.model_validate_json(doc["record"]) async for doc in found]

    async def note_runtime(self, runtime: ServedRuntime) -> bool:
        doc = {
            "execution_id": runtime.execution_id,
            "component": runtime.component,
            "address": runtime.address,
            "record": runtime.model_dump_json(),
        }
        try:
            await self._col("served_runtimes").insert_one(doc)
        except DuplicateKeyError:
            return False
        return True

    async def list_runtimes(self, execution_id: str) -> list[ServedRuntime]:
        found = self._col("served_runtimes").find({"execution_id": execution_id}).sort("_id", ASCENDING)
        return [ServedRuntime.model_validate_json(doc["record"]) async for doc in found]
