"""`MongoStore`'s audit chain, chain heads, usage counters and rate-limit slots (issue 34; mixed into it).

An audit record's `_id` is `<execution_id>:<seq, 10 digits>`: `_id` is unique on MongoDB and FerretDB
alike, so two replicas can never both append record `seq`; the loser reads the new last record and links
after it. Rate-limit slots use the same trick (`_id` `<key>|<slot>`). Usage counters are `$inc` updates:
exact on MongoDB, and on FerretDB v1 (an update is a read then a write) an add by two replicas at the same
instant can be lost (see `Store.add_usage`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.errors import DuplicateKeyError

from agent_runtime.audit_chain import link
from agent_runtime.oe.store.base import AuditRecord

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection

Document = dict[str, Any]
COUNTERS = ("steps", "model_calls", "tool_calls", "tokens", "cost")
_MAX_LINK_ATTEMPTS = 100


class MongoLedger:
    """The issue-34 collections next to the store's others: audit (its chained records), audit_heads,
    usage_counters and rate_slots."""

    if TYPE_CHECKING:

        def _col(self, name: str) -> AsyncCollection[Document]: ...

        def _lock(self, *key: Hashable) -> asyncio.Lock: ...

    async def _create_ledger_indexes(self) -> None:
        await self._col("audit").create_index(
            [("execution_id", ASCENDING), ("seq", ASCENDING)], name="execution_chain"
        )
        await self._col("rate_slots").create_index([("key", ASCENDING), ("slot", ASCENDING)], name="key_slot")

    async def append_audit(self, record: AuditRecord) -> AuditRecord:
        audit = self._col("audit")
        payload = record.model_dump(mode="json")
        async with self._lock("audit", record.execution_id):
            for _ in range(_MAX_LINK_ATTEMPTS):
                last = await audit.find_one(
                    {"execution_id": record.execution_id, "seq": {"$gte": 1}}, sort=[("seq", DESCENDING)]
                )
                linked = link(payload, previous=json.loads(last["record"]) if last else None)
                try:
                    await audit.insert_one(
                        {
                            "_id": f"{record.execution_id}:{linked['seq']:010d}",
                            "execution_id": record.execution_id,
                            "seq": linked["seq"],
                            "record": json.dumps(linked, separators=(",", ":")),
                        }
                    )
                except DuplicateKeyError:
                    continue  # another replica appended this seq first
                return AuditRecord.model_validate(linked)
        raise RuntimeError(f"could not append to the audit of {record.execution_id}")

    async def set_audit_head(self, execution_id: str, head: dict[str, Any]) -> None:
        heads = self._col("audit_heads")
        seq = int(head["seq"])
        text = json.dumps(head, separators=(",", ":"), sort_keys=True)
        async with self._lock("audit_head", execution_id):
            done = await heads.update_one(
                {"_id": execution_id, "seq": {"$lt": seq}}, {"$set": {"seq": seq, "head": text}}
            )
            if done.matched_count:
                return
            # DuplicateKeyError: a head with a higher seq is there already.
            with contextlib.suppress(DuplicateKeyError):
                await heads.insert_one({"_id": execution_id, "seq": seq, "head": text})

    async def get_audit_head(self, execution_id: str) -> dict[str, Any] | None:
        doc = await self._col("audit_heads").find_one({"_id": execution_id})
        return None if doc is None else dict(json.loads(doc["head"]))

    async def add_usage(self, key: str, deltas: dict[str, float], *, expires_at: float) -> dict[str, float]:
        unknown = set(deltas) - set(COUNTERS)
        if unknown:
            raise ValueError(
                f"unknown usage counters {sorted(unknown)}; the store keeps {', '.join(COUNTERS)}"
            )
        counters = self._col("usage_counters")
        inc = {name: float(deltas.get(name, 0)) for name in COUNTERS}
        async with self._lock("usage", key):
            for _ in range(3):
                try:
                    doc = await counters.find_one_and_update(
                        {"_id": key},
                        {"$inc": inc, "$max": {"expires_at": float(expires_at)}},
                        upsert=True,
                        return_document=ReturnDocument.AFTER,
                    )
                    break
                except DuplicateKeyError:
                    continue  # two upserts raced to create it: the second one updates now
            else:
                raise RuntimeError(f"could not add to the usage counters {key!r}")
        return {name: float(doc.get(name, 0)) for name in COUNTERS}

    async def get_usage(self, key: str) -> dict[str, float]:
        doc = await self._col("usage_counters").find_one({"_id": key})
        return {} if doc is None else {name: float(doc.get(name, 0)) for name in COUNTERS}

    async def take_rate_slot(self, key: str, slots: list[int], *, expires_at: float) -> int | None:
        if not slots:
            return None
        collection = self._col("rate_slots")
        lowest = min(slots)
        await collection.delete_many({"key": key, "slot": {"$lt": lowest}})
        taken = {doc["slot"] async for doc in collection.find({"key": key, "slot": {"$gte": lowest}})}
        for slot in slots:
            if slot in taken:
                continue
            try:
                await collection.insert_one(
                    {"_id": f"{key}|{slot}", "key": key, "slot": slot, "expires_at": float(expires_at)}
                )
            except DuplicateKeyError:
                continue  # another replica took it a moment ago
            return slot
        return None
