"""The default store: one SQLite file (WAL), driven from one worker thread, with vector search in-process.

Rows keep the record as JSON text beside the key columns, the time it sorts by and its vector as float32
bytes. Searches run on `VectorIndex` matrices loaded from those rows on first use per (partition,
namespace, model) and kept up to date by this store's own writes; a write by another connection to the
same file (PRAGMA data_version moves) drops them all, so a second process never serves a stale answer.
Loaded matrices are bounded by `cache_bytes`, least recently used first out.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from agent_runtime.memory.filters import Predicate
from agent_runtime.memory.records import (
    MemoryRecord,
    NamespaceSelector,
    Partition,
    decode_record,
    kept_created_at,
)
from agent_runtime.memory.store.cache import DEFAULT_CACHE_BYTES, IndexCache, IndexKey
from agent_runtime.memory.vectors import Vector, VectorIndex, from_bytes, to_bytes
from agent_runtime.memory.wire import NAMESPACE_SEPARATOR, Kind

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000
# A prefix matches whole segments: "a" covers "a" and "a.*", which sort between "a." and "a/".
_AFTER_SEPARATOR = chr(ord(NAMESPACE_SEPARATOR) + 1)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    kind TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    id TEXT NOT NULL,
    session_id TEXT,
    sort_at REAL NOT NULL,
    embedding_model TEXT,
    vector BLOB,
    record TEXT NOT NULL,
    PRIMARY KEY (kind, workspace_id, org_id, user_id, namespace, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_by_time
    ON records (kind, workspace_id, org_id, user_id, namespace, sort_at, id);
CREATE INDEX IF NOT EXISTS records_by_session
    ON records (kind, workspace_id, org_id, user_id, namespace, session_id, sort_at, id);
"""

_PARTITION = "kind = ? AND workspace_id = ? AND org_id = ? AND user_id = ?"
_KEY = f"{_PARTITION} AND namespace = ? AND id = ?"
_UPSERT = (
    "INSERT INTO records (kind, workspace_id, org_id, user_id, namespace, id, session_id, sort_at, "
    "embedding_model, vector, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (kind, workspace_id, org_id, user_id, namespace, id) DO UPDATE SET "
    "session_id = excluded.session_id, sort_at = excluded.sort_at, "
    "embedding_model = excluded.embedding_model, vector = excluded.vector, record = excluded.record"
)
_GET = f"SELECT record FROM records WHERE {_KEY}"  # noqa: S608 (fixed fragments only)
_GET_WITH_VECTOR = f"SELECT record, vector, embedding_model FROM records WHERE {_KEY}"  # noqa: S608
_DELETE = f"DELETE FROM records WHERE {_KEY}"  # noqa: S608
_LOAD_INDEX = (
    f"SELECT id, vector, json_extract(record, '$.metadata'), session_id FROM records "  # noqa: S608
    f"WHERE {_PARTITION} AND namespace = ? AND embedding_model = ? AND length(vector) = ?"
)


def sort_time(record: MemoryRecord) -> float:
    """What a record is ordered by: when an episode happened, when anything else last changed."""
    if record.kind is Kind.EPISODIC and record.occurred_at is not None:
        return record.occurred_at
    return record.updated_at


def _key_text(key: tuple[str, ...]) -> str:
    """A record's key for a log line: kind, workspace, org, user, namespace and id (no content)."""
    return "/".join(key)


def _partition_params(partition: Partition) -> tuple[str, ...]:
    return (partition.kind.value, partition.workspace_id, partition.org_id, partition.user_id)


def _selector_sql(selector: NamespaceSelector) -> tuple[str, tuple[str, ...]]:
    if not selector.prefix:
        return "namespace = ?", (selector.namespace,)
    ns = selector.namespace
    return (
        "(namespace = ? OR (namespace > ? AND namespace < ?))",
        (ns, ns + NAMESPACE_SEPARATOR, ns + _AFTER_SEPARATOR),
    )


class SqliteStore:
    """`MemoryStore` over one SQLite file; calls run in order on one thread, never on the event loop."""

    def __init__(self, path: str | Path, *, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.path = Path(path)
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._indexes = IndexCache(cache_bytes)
        self._data_version = -1

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    # plumbing

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            raise RuntimeError("SqliteStore is not open: await store.open() first")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("SqliteStore is closed")
        return self._conn

    def _connect(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise RuntimeError(f"SQLite refused WAL mode for {self.path} (journal_mode is {mode})")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._data_version = conn.execute("PRAGMA data_version").fetchone()[0]

    async def open(self) -> None:
        if self._executor is not None:
            return
        # One thread: the connection never changes threads and the caches need no lock.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-sqlite")
        try:
            await self._run(self._connect)
        except BaseException:
            self._executor.shutdown()
            self._executor = None
            raise

    async def close(self) -> None:
        if self._executor is None:
            return
        await self._run(self._disconnect)
        executor, self._executor = self._executor, None
        executor.shutdown()

    def _disconnect(self) -> None:
        self._indexes.drop()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _fresh(self) -> None:
        """Drop every loaded matrix when another connection has written to the file since we last looked."""
        version = self._db().execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._data_version = version
            self._indexes.drop()

    # writes

    async def put(
        self, record: MemoryRecord, vector: Vector | None, *, keep_vector: bool = False
    ) -> MemoryRecord | None:
        return await self._run(self._put, record, vector, keep_vector)

    def _put(self, record: MemoryRecord, vector: Vector | None, keep_vector: bool) -> MemoryRecord | None:
        self._fresh()
        db = self._db()
        key = (*_partition_params(record.partition), record.namespace, record.id)
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute(_GET_WITH_VECTOR, key).fetchone()
            if row is not None:
                # A replacement is the same record changed: it keeps the time it was first written.
                record = record.model_copy(update={"created_at": kept_created_at(json.loads(row[0]), record)})
            if keep_vector and row is not None and row[1] is not None:
                vector = from_bytes(row[1])
                record = record.model_copy(update={"embedding_model": row[2]})
            db.execute(
                _UPSERT,
                (
                    *key,
                    record.session_id,
                    sort_time(record),
                    record.embedding_model if vector is not None else None,
                    to_bytes(vector) if vector is not None else None,
                    record.model_dump_json(),
                ),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._indexes.write(
            record.partition,
            record.namespace,
            record.id,
            vector=vector,
            model=record.embedding_model,
            meta=(record.metadata, record.session_id),
        )
        return None if row is None else decode_record(row[0], key=_key_text(key))

    async def delete(self, partition: Partition, namespace: str, record_ids: list[str]) -> int:
        return await self._run(self._delete, partition, namespace, record_ids)

    def _delete(self, partition: Partition, namespace: str, record_ids: list[str]) -> int:
        self._fresh()
        db = self._db()
        params = [(*_partition_params(partition), namespace, record_id) for record_id in record_ids]
        db.execute("BEGIN IMMEDIATE")
        try:
            deleted = sum(db.execute(_DELETE, one).rowcount for one in params)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._indexes.remove(partition, namespace, record_ids)
        return deleted

    # reads

    async def get(self, partition: Partition, namespace: str, record_id: str) -> MemoryRecord | None:
        key = (*_partition_params(partition), namespace, record_id)
        row = await self._run(self._fetchone, _GET, key)
        return None if row is None else decode_record(row[0], key=_key_text(key))

    def _fetchone(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._db().execute(sql, params).fetchone()
        return row

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
        where, params = [_PARTITION], list(_partition_params(partition))
        ns_sql, ns_params = _selector_sql(selector)
        where.append(ns_sql)
        params += ns_params
        if session_id is not None:
            where.append("session_id = ?")
            params.append(session_id)
        if since is not None:
            where.append("sort_at >= ?")
            params.append(since)
        if until is not None:
            where.append("sort_at < ?")
            params.append(until)
        direction = "DESC" if descending else "ASC"
        sql = (
            f"SELECT record, namespace, id FROM records WHERE {' AND '.join(where)} "  # noqa: S608 (fixed fragments only)
            f"ORDER BY sort_at {direction}, id {direction}"
        )
        if keep is None:
            sql += " LIMIT ? OFFSET ?"
            params += [limit, offset]
        return await self._run(self._list, sql, tuple(params), keep, limit, offset)

    def _list(
        self, sql: str, params: tuple[Any, ...], keep: Predicate | None, limit: int, offset: int
    ) -> list[MemoryRecord]:
        rows: Iterator[tuple[str, str, str]] = self._db().execute(sql, params)
        if keep is None:
            decoded = (decode_record(text, key=f"{namespace}/{rid}") for text, namespace, rid in rows)
            return [record for record in decoded if record is not None]
        found: list[MemoryRecord] = []
        skipped = 0
        for text, namespace, record_id in rows:
            record = decode_record(text, key=f"{namespace}/{record_id}")
            if record is None or not keep(record.metadata):
                continue
            if skipped < offset:
                skipped += 1
                continue
            found.append(record)
            if len(found) == limit:
                break
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
        return await self._run(self._nearest, partition, selector, model, query, limit, keep, session_id)

    def _nearest(
        self,
        partition: Partition,
        selector: NamespaceSelector,
        model: str,
        query: Vector,
        limit: int,
        keep: Predicate | None,
        session_id: str | None,
    ) -> list[tuple[MemoryRecord, float]]:
        self._fresh()
        if selector.prefix:
            namespaces = self._namespaces(partition, selector.namespace, 1_000_000, 0)
        else:
            namespaces = [selector.namespace]
        accept: Callable[[Any], bool] | None = None
        if keep is not None or session_id is not None:

            def accept(meta: Any) -> bool:
                metadata, session = meta
                return (session_id is None or session == session_id) and (keep is None or keep(metadata))

        hits: list[tuple[float, str, str]] = []
        for namespace in namespaces:
            index = self._index((partition, namespace, model, int(query.shape[0])))
            hits += [(score, namespace, rid) for rid, score in index.scored(query, keep=accept, limit=limit)]
        hits.sort(key=lambda hit: -hit[0])
        found = []
        for score, namespace, record_id in hits[:limit]:
            key = (*_partition_params(partition), namespace, record_id)
            row = self._fetchone(_GET, key)
            record = None if row is None else decode_record(row[0], key=_key_text(key))
            if record is not None:
                found.append((record, score))
        return found

    def _index(self, key: IndexKey) -> VectorIndex:
        index = self._indexes.get(key)
        if index is not None:
            return index
        partition, namespace, model, dimension = key
        index = VectorIndex(dimension)
        params = (*_partition_params(partition), namespace, model, dimension * 4)
        for record_id, blob, metadata, session in self._db().execute(_LOAD_INDEX, params):
            index.put(record_id, from_bytes(blob), (json.loads(metadata) if metadata else {}, session))
        self._indexes.put(key, index)
        return index

    async def namespaces(
        self, partition: Partition, *, prefix: str | None, limit: int, offset: int = 0
    ) -> list[str]:
        return await self._run(self._namespaces, partition, prefix, limit, offset)

    def _namespaces(self, partition: Partition, prefix: str | None, limit: int, offset: int) -> list[str]:
        where, params = _PARTITION, list(_partition_params(partition))
        if prefix is not None:
            ns_sql, ns_params = _selector_sql(NamespaceSelector(prefix, prefix=True))
            where += f" AND {ns_sql}"
            params += ns_params
        sql = f"SELECT DISTINCT namespace FROM records WHERE {where} ORDER BY namespace LIMIT ? OFFSET ?"  # noqa: S608
        return [row[0] for row in self._db().execute(sql, (*params, limit, offset))]

    async def count(self, partition: Partition | None = None) -> int:
        if partition is None:
            row = await self._run(self._fetchone, "SELECT count(*) FROM records", ())
        else:
            sql = f"SELECT count(*) FROM records WHERE {_PARTITION}"  # noqa: S608
            row = await self._run(self._fetchone, sql, _partition_params(partition))
        return int(row[0]) if row else 0
