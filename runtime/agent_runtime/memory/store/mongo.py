"""The Memory store over MongoDB (or anything speaking its wire protocol), pymongo's native async client.

One collection, `memory_records`: `_id` is the whole key, the key fields and the sort time are indexed,
the record is JSON text (metadata keys such as `$ref` or `a.b` are not valid field names everywhere) and
the vector is float32 bytes. Searches read the candidate vectors of one partition and namespace from the
database on every query, so any number of replicas answer alike; that makes a search cost grow with the
namespace, which SQLite's in-process matrices avoid for a single replica.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Hashable
from typing import Any

import numpy as np
from bson.binary import Binary
from pymongo import ASCENDING, DESCENDING, AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import ConfigurationError, InvalidURI

from agent_runtime.memory.filters import Predicate
from agent_runtime.memory.records import MemoryRecord, NamespaceSelector, Partition
from agent_runtime.memory.store.sqlite import sort_time
from agent_runtime.memory.store.uri import redact_uri
from agent_runtime.memory.vectors import Vector, from_bytes, to_bytes, top_k
from agent_runtime.memory.wire import NAMESPACE_SEPARATOR

Document = dict[str, Any]
COLLECTION = "memory_records"
_AFTER_SEPARATOR = chr(ord(NAMESPACE_SEPARATOR) + 1)
_KEY_FIELDS = ("kind", "workspace_id", "org_id", "user_id", "namespace")


def _partition_query(partition: Partition) -> Document:
    return {
        "kind": partition.kind.value,
        "workspace_id": partition.workspace_id,
        "org_id": partition.org_id,
        "user_id": partition.user_id,
    }


def _selector_query(selector: NamespaceSelector) -> Document:
    ns = selector.namespace
    if not selector.prefix:
        return {"namespace": ns}
    below = {"namespace": {"$gt": ns + NAMESPACE_SEPARATOR, "$lt": ns + _AFTER_SEPARATOR}}
    return {"$or": [{"namespace": ns}, below]}


def _doc_id(partition: Partition, namespace: str, record_id: str) -> str:
    # Scope values and namespaces hold no control characters, so \x1f cannot occur inside a part.
    parts = (partition.kind.value, partition.workspace_id, partition.org_id, partition.user_id, namespace)
    return "\x1f".join((*parts, record_id))


class MongoStore:
    """`MemoryStore` over one MongoDB database; `uri` may hold credentials and never appears in messages."""

    def __init__(self, uri: str, database: str) -> None:
        self._uri = uri
        self.database = database
        self._client: AsyncMongoClient[Document] | None = None
        self._records: AsyncCollection[Document] | None = None
        # Replacing a record reads the old one first; within one process, writes to one key take turns.
        self._locks: weakref.WeakValueDictionary[Hashable, asyncio.Lock] = weakref.WeakValueDictionary()

    def __repr__(self) -> str:
        return f"MongoStore({redact_uri(self._uri)!r}, {self.database!r})"

    def _col(self) -> AsyncCollection[Document]:
        if self._records is None:
            raise RuntimeError("MongoStore is not open: await store.open() first")
        return self._records

    def _lock(self, key: Hashable) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def open(self) -> None:
        if self._client is not None:
            return
        problem = ""
        try:
            client: AsyncMongoClient[Document] = AsyncMongoClient(self._uri)
        except (ConfigurationError, InvalidURI, ValueError, TypeError) as exc:
            problem = str(exc).replace(self._uri, redact_uri(self._uri))
        if problem:
            # Raised outside the except block, so no traceback carries pymongo's error (or the password).
            raise ValueError(
                f"MEMORY_MONGODB_URI is not a valid MongoDB URI ({redact_uri(self._uri)}): {problem}"
            )
        self._client, self._records = client, client[self.database][COLLECTION]
        try:
            key = [(name, ASCENDING) for name in _KEY_FIELDS]
            records = self._col()
            await records.create_index([*key, ("sort_at", ASCENDING), ("id", ASCENDING)], name="by_time")
            await records.create_index(
                [*key, ("session_id", ASCENDING), ("sort_at", ASCENDING)], name="by_session"
            )
            await records.create_index(
                [*key, ("embedding_model", ASCENDING), ("dim", ASCENDING)], name="by_model"
            )
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        client, self._client, self._records = self._client, None, None
        if client is not None:
            await client.close()

    # writes

    async def put(
        self, record: MemoryRecord, vector: Vector | None, *, keep_vector: bool = False
    ) -> MemoryRecord | None:
        doc_id = _doc_id(record.partition, record.namespace, record.id)
        async with self._lock(doc_id):
            old = await self._col().find_one({"_id": doc_id})
            if old is not None:
                # A replacement is the same record changed: it keeps the time it was first written.
                created_at = json.loads(old["record"])["created_at"]
                record = record.model_copy(update={"created_at": created_at})
            if keep_vector and old is not None and old.get("vector") is not None:
                vector = from_bytes(bytes(old["vector"]))
                record = record.model_copy(update={"embedding_model": old["embedding_model"]})
            await self._col().replace_one({"_id": doc_id}, self._doc(doc_id, record, vector), upsert=True)
        return None if old is None else MemoryRecord.model_validate_json(old["record"])

    @staticmethod
    def _doc(doc_id: str, record: MemoryRecord, vector: Vector | None) -> Document:
        doc: Document = {
            "_id": doc_id,
            **_partition_query(record.partition),
            "namespace": record.namespace,
            "id": record.id,
            "session_id": record.session_id,
            "sort_at": sort_time(record),
            "embedding_model": record.embedding_model if vector is not None else None,
            "dim": int(vector.shape[0]) if vector is not None else None,
            "vector": Binary(to_bytes(vector)) if vector is not None else None,
            "record": record.model_dump_json(),
        }
        return doc

    async def delete(self, partition: Partition, namespace: str, record_ids: list[str]) -> int:
        ids = [_doc_id(partition, namespace, record_id) for record_id in record_ids]
        result = await self._col().delete_many({"_id": {"$in": ids}})
        return int(result.deleted_count)

    # reads

    async def get(self, partition: Partition, namespace: str, record_id: str) -> MemoryRecord | None:
        doc = await self._col().find_one({"_id": _doc_id(partition, namespace, record_id)}, {"record": 1})
        return None if doc is None else MemoryRecord.model_validate_json(doc["record"])

    async def list_records(
        self,
        partition: Partition,
        selector: NamespaceSelector,
        *,
        session_id: str | None = None,
        since: float | None = None,
        until: float | None = None,
        descending: bool = True,
        limit: int,
        offset: int = 0,
        keep: Predicate | None = None,
    ) -> list[MemoryRecord]:
        query = {**_partition_query(partition), **_selector_query(selector)}
        if session_id is not None:
            query["session_id"] = session_id
        window: Document = {}
        if since is not None:
            window["$gte"] = since
        if until is not None:
            window["$lt"] = until
        if window:
            query["sort_at"] = window
        direction = DESCENDING if descending else ASCENDING
        cursor = self._col().find(query, {"record": 1}).sort([("sort_at", direction), ("id", direction)])
        if keep is None:
            cursor = cursor.skip(offset).limit(limit)
        found: list[MemoryRecord] = []
        skipped = 0
        async for doc in cursor:
            record = MemoryRecord.model_validate_json(doc["record"])
            if keep is not None:
                if not keep(record.metadata):
                    continue
                if skipped < offset:
                    skipped += 1
                    continue
            found.append(record)
            if len(found) == limit:
                break
        await cursor.close()
        return found

    async def nearest(
        self,
        partition: Partition,
        selector: NamespaceSelector,
        *,
        model: str,
        query: Vector,
        limit: int,
        keep: Predicate | None = None,
        session_id: str | None = None,
    ) -> list[tuple[MemoryRecord, float]]:
        dimension = int(query.shape[0])
        match = {
            **_partition_query(partition),
            **_selector_query(selector),
            "embedding_model": model,
            "dim": dimension,
        }
        if session_id is not None:
            match["session_id"] = session_id
        projection = {"vector": 1, "record": 1} if keep is not None else {"vector": 1}
        docs = [doc async for doc in self._col().find(match, projection)]
        if not docs:
            return []
        matrix = np.frombuffer(b"".join(bytes(doc["vector"]) for doc in docs), dtype="<f4")
        scores = matrix.reshape(len(docs), dimension).astype(np.float32, copy=False) @ query
        if keep is None:
            best = top_k(scores, limit)
            wanted = [docs[i]["_id"] for i in best]
            fetched = {
                doc["_id"]: doc async for doc in self._col().find({"_id": {"$in": wanted}}, {"record": 1})
            }
            return [
                (MemoryRecord.model_validate_json(fetched[docs[i]["_id"]]["record"]), float(scores[i]))
                for i in best
                if docs[i]["_id"] in fetched
            ]
        found: list[tuple[MemoryRecord, float]] = []
        for i in np.argsort(-scores, kind="stable"):
            record = MemoryRecord.model_validate_json(docs[i]["record"])
            if keep(record.metadata):
                found.append((record, float(scores[i])))
                if len(found) == limit:
                    break
        return found

    async def namespaces(
        self, partition: Partition, *, prefix: str | None, limit: int, offset: int = 0
    ) -> list[str]:
        query = _partition_query(partition)
        if prefix is not None:
            query.update(_selector_query(NamespaceSelector(prefix, prefix=True)))
        names = sorted(await self._col().distinct("namespace", query))
        return names[offset : offset + limit]

    async def count(self, partition: Partition | None = None) -> int:
        query = {} if partition is None else _partition_query(partition)
        return int(await self._col().count_documents(query))
