"""The Memory store over MongoDB (or anything speaking its wire protocol), pymongo's native async client.

Collection `memory_records`: `_id` is the whole key, the key fields and the sort time are indexed, the
record is JSON text (metadata keys such as `$ref` or `a.b` are not valid field names everywhere) and the
vector is float32 bytes. Searches run on in-process matrices (`store.cache`), as on SQLite, kept right
across replicas by `memory_versions`: one document per namespace whose token every write replaces (an
atomic find-and-modify). A replica whose loaded token is the one a write replaced applies that write to
its matrices; any other token, seen on a write or before a search, means another replica wrote, and the
namespace's matrices are loaded again. So a search costs one small read plus the scoring, and a matrix is
loaded only after someone else's write. FerretDB v1 applies an update as a read then a write, so there two
replicas writing one namespace at the same instant can hide a write from each other's matrices until the
next write there; a single replica is always right (its writes to a namespace take turns).
"""

from __future__ import annotations

import asyncio
import json
import uuid
import weakref
from collections.abc import Callable, Hashable
from typing import Any

from bson.binary import Binary
from pymongo import ASCENDING, DESCENDING, AsyncMongoClient, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import ConfigurationError, InvalidURI

from agent_runtime.memory.filters import Predicate
from agent_runtime.memory.records import (
    MemoryRecord,
    NamespaceSelector,
    Partition,
    decode_record,
    kept_created_at,
)
from agent_runtime.memory.store.cache import DEFAULT_CACHE_BYTES, IndexCache, IndexKey
from agent_runtime.memory.store.sqlite import sort_time
from agent_runtime.memory.store.uri import redact_uri
from agent_runtime.memory.vectors import Vector, VectorIndex, from_bytes, to_bytes
from agent_runtime.memory.wire import NAMESPACE_SEPARATOR

Document = dict[str, Any]
COLLECTION = "memory_records"
VERSIONS = "memory_versions"
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


def _version_id(partition: Partition, namespace: str) -> str:
    parts = (partition.kind.value, partition.workspace_id, partition.org_id, partition.user_id, namespace)
    return "\x1f".join(parts)


def _key_text(doc_id: str) -> str:
    """A record's `_id` for a log line (its parts joined by '/')."""
    return doc_id.replace("\x1f", "/")


def _doc_id(partition: Partition, namespace: str, record_id: str) -> str:
    # Scope values and namespaces hold no control characters, so \x1f cannot occur inside a part.
    parts = (partition.kind.value, partition.workspace_id, partition.org_id, partition.user_id, namespace)
    return "\x1f".join((*parts, record_id))


class MongoStore:
    """`MemoryStore` over one MongoDB database; `uri` may hold credentials and never appears in messages."""

    def __init__(self, uri: str, database: str, *, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self._uri = uri
        self.database = database
        self._client: AsyncMongoClient[Document] | None = None
        self._records: AsyncCollection[Document] | None = None
        self._versions: AsyncCollection[Document] | None = None
        # Within one process, writes and matrix loads of one namespace take turns.
        self._locks: weakref.WeakValueDictionary[Hashable, asyncio.Lock] = weakref.WeakValueDictionary()
        self._indexes = IndexCache(cache_bytes)
        self._tokens: dict[tuple[Partition, str], str | None] = {}

    def __repr__(self) -> str:
        return f"MongoStore({redact_uri(self._uri)!r}, {self.database!r})"

    def _col(self) -> AsyncCollection[Document]:
        if self._records is None:
            raise RuntimeError("MongoStore is not open: await store.open() first")
        return self._records

    def _versions_col(self) -> AsyncCollection[Document]:
        if self._versions is None:
            raise RuntimeError("MongoStore is not open: await store.open() first")
        return self._versions

    def _lock(self, *key: Hashable) -> asyncio.Lock:
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
        self._versions = client[self.database][VERSIONS]
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
        client, self._client, self._records, self._versions = self._client, None, None, None
        self._indexes.drop()
        self._tokens.clear()
        if client is not None:
            await client.close()

    # writes

    async def put(
        self, record: MemoryRecord, vector: Vector | None, *, keep_vector: bool = False
    ) -> MemoryRecord | None:
        doc_id = _doc_id(record.partition, record.namespace, record.id)
        async with self._lock(record.partition, record.namespace):
            old = await self._col().find_one({"_id": doc_id})
            if old is not None:
                # A replacement is the same record changed: it keeps the time it was first written.
                record = record.model_copy(
                    update={"created_at": kept_created_at(json.loads(old["record"]), record)}
                )
            if keep_vector and old is not None and old.get("vector") is not None:
                vector = from_bytes(bytes(old["vector"]))
                record = record.model_copy(update={"embedding_model": old["embedding_model"]})
            await self._col().replace_one({"_id": doc_id}, self._doc(doc_id, record, vector), upsert=True)
            stored = record
            await self._changed(
                record.partition,
                record.namespace,
                lambda: self._indexes.write(
                    stored.partition,
                    stored.namespace,
                    stored.id,
                    vector=vector,
                    model=stored.embedding_model,
                    meta=(stored.metadata, stored.session_id),
                ),
            )
        return None if old is None else decode_record(old["record"], key=_key_text(doc_id))

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
        deleted = 0
        async with self._lock(partition, namespace):
            for record_id in record_ids:
                result = await self._col().delete_one({"_id": _doc_id(partition, namespace, record_id)})
                deleted += int(result.deleted_count)
            await self._changed(
                partition, namespace, lambda: self._indexes.remove(partition, namespace, record_ids)
            )
        return deleted

    # reads

    async def get(self, partition: Partition, namespace: str, record_id: str) -> MemoryRecord | None:
        doc_id = _doc_id(partition, namespace, record_id)
        doc = await self._col().find_one({"_id": doc_id}, {"record": 1})
        return None if doc is None else decode_record(doc["record"], key=_key_text(doc_id))

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
            record = decode_record(doc["record"], key=_key_text(doc["_id"]))
            if record is None:
                continue
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
        if selector.prefix:
            namespaces = await self.namespaces(partition, prefix=selector.namespace, limit=1_000_000)
        else:
            namespaces = [selector.namespace]
        accept: Callable[[Any], bool] | None = None
        if keep is not None or session_id is not None:

            def accept(meta: Any) -> bool:
                metadata, session = meta
                return (session_id is None or session == session_id) and (keep is None or keep(metadata))

        hits: list[tuple[float, str, str]] = []
        for namespace in namespaces:
            index = await self._index((partition, namespace, model, int(query.shape[0])))
            hits += [(score, namespace, rid) for rid, score in index.scored(query, keep=accept, limit=limit)]
        hits.sort(key=lambda hit: -hit[0])
        best = hits[:limit]
        wanted = [_doc_id(partition, namespace, record_id) for _, namespace, record_id in best]
        # One lookup per hit: an `_id` equality is an index lookup everywhere, an `$in` is not on FerretDB.
        found = []
        for (score, _, _), doc_id in zip(best, wanted, strict=True):
            doc = await self._col().find_one({"_id": doc_id}, {"record": 1})
            record = None if doc is None else decode_record(doc["record"], key=_key_text(doc_id))
            if record is not None:
                found.append((record, score))
        return found

    async def _index(self, key: IndexKey) -> VectorIndex:
        """The namespace's matrix, reloaded when its version token shows a write we did not make."""
        partition, namespace, model, dimension = key
        async with self._lock(partition, namespace):
            current = await self._versions_col().find_one({"_id": _version_id(partition, namespace)})
            token = None if current is None else current["token"]
            index = self._indexes.get(key)
            if index is not None and self._tokens.get((partition, namespace)) == token:
                return index
            if self._tokens.get((partition, namespace)) != token:
                self._indexes.drop(partition, namespace)
            match = {
                **_partition_query(partition),
                "namespace": namespace,
                "embedding_model": model,
                "dim": dimension,
            }
            index = VectorIndex(dimension)
            async for doc in self._col().find(match, {"id": 1, "vector": 1, "record": 1, "session_id": 1}):
                metadata = json.loads(doc["record"]).get("metadata", {})
                index.put(doc["id"], from_bytes(bytes(doc["vector"])), (metadata, doc.get("session_id")))
            self._tokens[(partition, namespace)] = token
            self._indexes.put(key, index)
            return index

    async def _changed(
        self,
        partition: Partition,
        namespace: str,
        apply: Callable[[], None],
    ) -> None:
        """After a write: a new version token; our matrices take the change only if nobody else wrote
        since they were loaded (MongoDB swaps the token atomically), else they are dropped."""
        token = uuid.uuid4().hex
        before = await self._versions_col().find_one_and_update(
            {"_id": _version_id(partition, namespace)},
            {"$set": {"token": token}},
            upsert=True,
            return_document=ReturnDocument.BEFORE,
        )
        previous = None if before is None else before["token"]
        if (partition, namespace) in self._tokens and self._tokens[(partition, namespace)] == previous:
            apply()
            self._tokens[(partition, namespace)] = token
        else:
            self._indexes.drop(partition, namespace)
            self._tokens.pop((partition, namespace), None)

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
