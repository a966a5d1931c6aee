"""The embedded default store: one SQLite file in WAL mode, driven from one dedicated worker thread.

Each record is kept whole as JSON text next to the few columns that are indexed or compared. Every call is
one statement, so each is atomic; calls queued while the thread was busy are committed together in one
transaction (group commit: one WAL commit for many calls, which is where a step's time went), and no call
returns before its transaction committed. WAL with synchronous=NORMAL makes a committed write survive a
SIGKILL of the process (an OS crash may lose the last transactions, which is not what this store promises).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import queue
import sqlite3
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, TypeVar

from agent_runtime.oe.store.base import (
    AuditRecord,
    EventRecord,
    ExecutionRecord,
    ExecutionState,
    Page,
    StepRecord,
)
from agent_runtime.oe.store.codec import decode_cursor, encode_cursor, encode_execution_changes
from agent_runtime.oe.store.sqlite_deliveries import DELIVERY_SCHEMA, SqliteDeliveries
from agent_runtime.oe.store.sqlite_ledger import LEDGER_SCHEMA, SqliteLedger
from agent_runtime.oe.store.sqlite_sessions import SESSION_SCHEMA, SqliteSessions
from agent_runtime.oe.store.transactions import EachCallItsOwn
from agent_runtime.protocol import CallOutcome

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS executions (
    execution_id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS executions_by_created ON executions (created_at, execution_id);
CREATE INDEX IF NOT EXISTS executions_by_agent ON executions (agent, created_at, execution_id);
CREATE INDEX IF NOT EXISTS executions_by_status ON executions (status, created_at, execution_id);
CREATE INDEX IF NOT EXISTS executions_by_parent ON executions (json_extract(record, '$.parent.execution_id'));
CREATE TABLE IF NOT EXISTS steps (
    execution_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (execution_id, step)
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY,
    execution_id TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_by_execution ON audit (execution_id, id);
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    execution_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (execution_id, seq)
);
"""

# An agentRef child's parent (issue 38): the same expression as the index's, so the index serves the query.
_PARENT_ID = "json_extract(record, '$.parent.execution_id')"

_INSERT_EXECUTION = (
    "INSERT INTO executions (execution_id, agent, status, created_at, record) VALUES (?, ?, ?, ?, ?)"
)
_GET_EXECUTION = "SELECT record FROM executions WHERE execution_id = ?"
# Numbers go into json_set as JSON text through json(?): a bound REAL would be rendered with 15 digits.
_NOTE_STEP = (
    "UPDATE executions SET record = json_set(record, '$.step_count', "
    "max(json_extract(record, '$.step_count'), ?), '$.updated_at', json(?)) WHERE execution_id = ?"
)
_COUNT_EXECUTIONS = "SELECT count(*) FROM executions"
_CLAIM_STEP = (
    "INSERT INTO steps (execution_id, step, record) VALUES (?, ?, ?) "
    "ON CONFLICT (execution_id, step) DO NOTHING"
)
_GET_STEP = "SELECT record FROM steps WHERE execution_id = ? AND step = ?"
_FINISH_STEP = (
    "UPDATE steps SET record = json_set(record, '$.state', 'done', '$.outcome', json(?), "
    "'$.updated_at', json(?)) WHERE execution_id = ? AND step = ?"
)
# Only a step still in progress changes hands or goes: a done step is a cached result and stays as it is.
_RESET_STEP = (
    "UPDATE steps SET record = json_set(record, '$.owner', ?, '$.updated_at', json(?)) "
    "WHERE execution_id = ? AND step = ? AND json_extract(record, '$.state') = 'in_progress'"
)
# A held (suspend) outcome goes back to in progress for its approved call; the held payload stays.
_REOPEN_STEP = (
    "UPDATE steps SET record = json_set(record, '$.state', 'in_progress', '$.owner', ?, '$.run', ?, "
    "'$.updated_at', json(?)) WHERE execution_id = ? AND step = ? "
    "AND json_extract(record, '$.state') = 'done' AND json_extract(record, '$.outcome.status') = 'suspend'"
)
_DELETE_STEP = (
    "DELETE FROM steps "
    "WHERE execution_id = ? AND step = ? AND json_extract(record, '$.state') = 'in_progress'"
)
_CLAIM_ONCE = "INSERT INTO claims (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"
_GET_CLAIM = "SELECT value FROM claims WHERE key = ?"
_LIST_AUDIT = "SELECT record FROM audit WHERE execution_id = ? ORDER BY id"
# One statement, so reading the last seq and inserting the next one cannot interleave with another writer.
_APPEND_EVENT = (
    "INSERT INTO events (execution_id, seq, record) "
    "SELECT ?1, next.seq, json_set(?2, '$.seq', next.seq) "
    "FROM (SELECT coalesce(max(seq), 0) + 1 AS seq FROM events WHERE execution_id = ?1) AS next "
    "RETURNING seq"
)
_LIST_EVENTS = "SELECT record FROM events WHERE execution_id = ? AND seq > ? ORDER BY seq LIMIT ?"
# Retention (issue 32): old stream events, a bounded batch, never an execution's latest (seq is max + 1).
_PRUNE_EVENTS = (
    "DELETE FROM events WHERE rowid IN (SELECT rowid FROM events AS e "
    "WHERE json_extract(e.record, '$.type') IN (SELECT value FROM json_each(?1)) "
    "AND json_extract(e.record, '$.at') < ?2 "
    "AND e.seq < (SELECT max(seq) FROM events AS latest WHERE latest.execution_id = e.execution_id) "
    "LIMIT ?3)"
)


def _placeholders(n: int) -> str:
    return ", ".join(["?"] * n)


@functools.lru_cache(maxsize=256)
def _set_fields_sql(n_fields: int, *, set_status: bool, n_from_states: int | None) -> str:
    """UPDATE with `n_fields` json_set (path, value) pairs; with `n_from_states`, a compare-and-set on status
    that returns the updated record. Only placeholders are formatted into the text."""
    pairs = ", ".join(["?, json(?)"] * n_fields)
    status = "status = ?, " if set_status else ""
    sql = f"UPDATE executions SET {status}record = json_set(record, {pairs}) WHERE execution_id = ?"  # noqa: S608
    if n_from_states is not None:
        sql += f" AND status IN ({_placeholders(n_from_states)}) RETURNING record"
    return sql


@functools.lru_cache(maxsize=16)
def _match_status_sql(n_from_states: int) -> str:
    where = f"execution_id = ? AND status IN ({_placeholders(n_from_states)})"
    return f"SELECT record FROM executions WHERE {where}"  # noqa: S608 (placeholders only)


@functools.lru_cache(maxsize=16)
def _list_sql(
    *, by_agent: bool, by_project: bool, n_projects: int, by_status: bool, by_parent: bool, after: bool
) -> str:
    where = []
    if by_agent:
        where.append("agent = ?")
    if by_project:
        where.append("json_extract(record, '$.project_id') = ?")
    if n_projects:
        where.append(f"json_extract(record, '$.project_id') IN ({_placeholders(n_projects)})")
    if by_status:
        where.append("status = ?")
    if by_parent:
        where.append(f"{_PARENT_ID} = ?")
    if after:
        where.append("(created_at < ? OR (created_at = ? AND execution_id < ?))")
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    return f"SELECT record FROM executions {clause}ORDER BY created_at DESC, execution_id DESC LIMIT ?"  # noqa: S608 (fixed fragments only)


class SqliteStore(EachCallItsOwn, SqliteLedger, SqliteDeliveries, SqliteSessions):
    """`Store` over one SQLite file; calls are serialized on one worker thread, never blocking the loop."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._worker: _Worker | None = None
        self._conn: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    # plumbing

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._worker is None:
            raise RuntimeError("SqliteStore is not open: await store.open() first")
        return await self._worker.submit(fn, *args)

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("SqliteStore is closed")
        return self._conn

    def _connect(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,  # autocommit: each statement is its own transaction
            cached_statements=512,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise RuntimeError(f"SQLite refused WAL mode for {self.path} (journal_mode is {mode})")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(_SCHEMA)
            conn.executescript(DELIVERY_SCHEMA)
            conn.executescript(LEDGER_SCHEMA)
            conn.executescript(SESSION_SCHEMA)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def open(self) -> None:
        """Create the parent directory, the file, tables and indexes; idempotent."""
        if self._worker is not None:
            return
        # One thread: calls are serialized in arrival order and the connection never changes threads.
        self._worker = _Worker(self._db)
        try:
            await self._run(self._connect)
        except BaseException:
            self._worker.stop()
            self._worker = None
            raise

    async def close(self) -> None:
        if self._worker is None:
            return
        worker, self._worker = self._worker, None
        # After every queued call: closing mid-batch would roll the batch back.
        await asyncio.to_thread(worker.stop, final=self._disconnect)

    # executions

    async def create_execution(self, record: ExecutionRecord) -> None:
        await self._run(self._create_execution, record)

    def _create_execution(self, record: ExecutionRecord) -> None:
        try:
            self._db().execute(
                _INSERT_EXECUTION,
                (
                    record.execution_id,
                    record.agent,
                    record.status.value,
                    record.created_at,
                    record.model_dump_json(),
                ),
            )
        except sqlite3.IntegrityError:
            raise KeyError(record.execution_id) from None

    async def get_execution(self, execution_id: str) -> ExecutionRecord | None:
        row = await self._run(self._fetchone, _GET_EXECUTION, (execution_id,))
        return None if row is None else ExecutionRecord.model_validate_json(row[0])

    def _fetchone(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        # fetchall: a RETURNING statement commits only once stepped to its end.
        rows = self._db().execute(sql, params).fetchall()
        return rows[0] if rows else None

    def _fetchall(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self._db().execute(sql, params).fetchall()

    def _execute(self, sql: str, params: tuple[Any, ...]) -> int:
        return self._db().execute(sql, params).rowcount

    async def transition(
        self,
        execution_id: str,
        *,
        from_states: frozenset[ExecutionState],
        changes: dict[str, Any],
    ) -> ExecutionRecord | None:
        encoded = encode_execution_changes(changes, allow_status=True)
        if not from_states:
            return None
        states = [ExecutionState(s).value for s in from_states]
        if not encoded:
            sql, params = _match_status_sql(len(states)), [execution_id, *states]
        else:
            set_status = "status" in encoded
            params = [json.loads(encoded["status"])] if set_status else []
            for name, text in encoded.items():
                params += (f"$.{name}", text)
            params += (execution_id, *states)
            sql = _set_fields_sql(len(encoded), set_status=set_status, n_from_states=len(states))
        row = await self._run(self._fetchone, sql, tuple(params))
        return None if row is None else ExecutionRecord.model_validate_json(row[0])

    async def update_execution(self, execution_id: str, changes: dict[str, Any]) -> None:
        encoded = encode_execution_changes(changes, allow_status=False)
        if not encoded:
            return
        params: list[Any] = []
        for name, text in encoded.items():
            params += (f"$.{name}", text)
        params.append(execution_id)
        sql = _set_fields_sql(len(encoded), set_status=False, n_from_states=None)
        await self._run(self._execute, sql, tuple(params))

    async def note_step(self, execution_id: str, step: int, *, at: float) -> None:
        await self._run(self._execute, _NOTE_STEP, (int(step), json.dumps(float(at)), execution_id))

    async def list_executions(
        self,
        *,
        agent: str | None = None,
        project_id: str | None = None,
        project_ids: Collection[str] | None = None,
        status: ExecutionState | None = None,
        limit: int = 50,
        cursor: str | None = None,
        parent_execution_id: str | None = None,
    ) -> Page:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        if project_ids is not None and not project_ids:
            return Page(items=[])
        params: list[Any] = []
        if agent is not None:
            params.append(agent)
        if project_id is not None:
            params.append(project_id)
        projects = sorted(project_ids) if project_ids is not None else []
        params += projects
        if status is not None:
            params.append(ExecutionState(status).value)
        if parent_execution_id is not None:
            params.append(parent_execution_id)
        if cursor is not None:
            created_at, last_id = decode_cursor(cursor)
            params += (created_at, created_at, last_id)
        params.append(limit + 1)  # one more than asked tells whether another page follows
        sql = _list_sql(
            by_agent=agent is not None,
            by_project=project_id is not None,
            n_projects=len(projects),
            by_status=status is not None,
            by_parent=parent_execution_id is not None,
            after=cursor is not None,
        )
        rows = await self._run(self._fetchall, sql, tuple(params))
        items = [ExecutionRecord.model_validate_json(row[0]) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            next_cursor = encode_cursor(items[-1].created_at, items[-1].execution_id)
        return Page(items=items, next_cursor=next_cursor)

    async def count_executions(self) -> int:
        row = await self._run(self._fetchone, _COUNT_EXECUTIONS, ())
        return int(row[0]) if row else 0

    # steps

    async def claim_step(self, record: StepRecord) -> StepRecord | None:
        return await self._run(self._claim_step, record.execution_id, record.step, record.model_dump_json())

    def _claim_step(self, execution_id: str, step: int, text: str) -> StepRecord | None:
        db = self._db()
        # Loop only if the winner's row was deleted between our insert and our read.
        while True:
            if db.execute(_CLAIM_STEP, (execution_id, step, text)).rowcount == 1:
                return None
            row = db.execute(_GET_STEP, (execution_id, step)).fetchone()
            if row is not None:
                return StepRecord.model_validate_json(row[0])

    async def get_step(self, execution_id: str, step: int) -> StepRecord | None:
        row = await self._run(self._fetchone, _GET_STEP, (execution_id, step))
        return None if row is None else StepRecord.model_validate_json(row[0])

    async def finish_step(self, execution_id: str, step: int, outcome: CallOutcome, *, at: float) -> None:
        params = (outcome.model_dump_json(), json.dumps(float(at)), execution_id, step)
        await self._run(self._execute, _FINISH_STEP, params)

    async def reset_step(self, execution_id: str, step: int, *, owner: str, at: float) -> None:
        await self._run(self._execute, _RESET_STEP, (owner, json.dumps(float(at)), execution_id, step))

    async def reopen_step(self, execution_id: str, step: int, *, owner: str, run: int, at: float) -> bool:
        params = (owner, int(run), json.dumps(float(at)), execution_id, step)
        return await self._run(self._execute, _REOPEN_STEP, params) == 1

    async def delete_step(self, execution_id: str, step: int) -> None:
        await self._run(self._execute, _DELETE_STEP, (execution_id, step))

    # one-time claims

    async def claim_once(self, key: str, value: dict[str, Any]) -> dict[str, Any] | None:
        return await self._run(self._claim_once, key, json.dumps(value, separators=(",", ":")))

    def _claim_once(self, key: str, text: str) -> dict[str, Any] | None:
        db = self._db()
        if db.execute(_CLAIM_ONCE, (key, text)).rowcount == 1:
            return None
        row = db.execute(_GET_CLAIM, (key,)).fetchone()
        stored: dict[str, Any] = json.loads(row[0])
        return stored

    # audit log

    # append_audit: SqliteLedger (the hash chain)

    async def list_audit(self, execution_id: str) -> list[AuditRecord]:
        rows = await self._run(self._fetchall, _LIST_AUDIT, (execution_id,))
        return [AuditRecord.model_validate_json(row[0]) for row in rows]

    # events

    async def append_event(
        self, execution_id: str, *, type: str, step: int | None, data: dict[str, Any], at: float
    ) -> EventRecord:
        record = EventRecord(execution_id=execution_id, seq=0, type=type, step=step, data=data, at=at)
        row = await self._run(self._fetchone, _APPEND_EVENT, (execution_id, record.model_dump_json()))
        assert row is not None  # INSERT ... SELECT of an aggregate always yields one row
        return record.model_copy(update={"seq": int(row[0])})

    async def list_events(
        self, execution_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[EventRecord]:
        # LIMIT -1 is SQLite's "no limit".
        rows = await self._run(
            self._fetchall, _LIST_EVENTS, (execution_id, after_seq, -1 if limit is None else limit)
        )
        return [EventRecord.model_validate_json(row[0]) for row in rows]

    async def prune_events(self, *, types: Collection[str], before: float, limit: int) -> int:
        return await self._run(self._execute, _PRUNE_EVENTS, (json.dumps(sorted(types)), before, limit))


_MAX_BATCH = 256
_Call = tuple[Callable[..., Any], tuple[Any, ...], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class _Worker:
    """The store's one thread: runs queued calls in order, committing each batch as one transaction."""

    def __init__(self, connection: Callable[[], sqlite3.Connection]) -> None:
        self._connection = connection
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._final: Callable[[], None] | None = None
        self._thread = threading.Thread(target=self._serve, name="oe-sqlite", daemon=True)
        self._thread.start()

    async def submit(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put((fn, args, loop, future))
        return await future

    def stop(self, *, final: Callable[[], None] | None = None) -> None:
        """Finish what is queued, run `final` on this thread, and end it."""
        self._final = final
        self._calls.put(None)
        self._thread.join(timeout=10)

    def _serve(self) -> None:
        try:
            self._serve_calls()
        finally:
            if self._final is not None:
                self._final()

    def _serve_calls(self) -> None:
        while True:
            first = self._calls.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < _MAX_BATCH:
                try:
                    more = self._calls.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._run_batch(batch)
                    return
                batch.append(more)
            self._run_batch(batch)

    def _run_batch(self, batch: list[_Call]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        conn = self._transaction_connection(batch)
        for fn, args, _, _ in batch:
            try:
                outcomes.append((True, fn(*args)))
            except BaseException as exc:  # one call's failure (a duplicate key) is only that call's
                outcomes.append((False, exc))
        if conn is not None:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                # Nothing of the batch is durable: every caller in it gets the failure.
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                outcomes = [(False, exc)] * len(batch)
        # One wake-up of each event loop per batch, not one per call: each is a write to its self-pipe.
        settled: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
        for (_, _, loop, future), (ok, value) in zip(batch, outcomes, strict=True):
            settled.setdefault(loop, []).append((future, ok, value))
        for loop, results in settled.items():
            loop.call_soon_threadsafe(_settle_all, results)

    def _transaction_connection(self, batch: list[_Call]) -> sqlite3.Connection | None:
        """Open one transaction around a batch of several calls; a lone call runs in autocommit."""
        if len(batch) < 2:
            return None
        try:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
        except (RuntimeError, sqlite3.Error):
            return None  # not connected yet (open) or the lock is busy: run the calls one by one
        return conn


def _settle_all(results: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for future, ok, value in results:
        if future.cancelled():
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
