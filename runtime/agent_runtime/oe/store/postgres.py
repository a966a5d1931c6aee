"""The OE store over PostgreSQL (asyncpg), for several OE replicas on one database.

Every call is one statement, so each is its own transaction (inside `atomic()` the calls a task makes
are one: a step's outcome, what it holds and its audit record; postgres_transaction.py): a status change
is a compare-and-set (`UPDATE ... WHERE status = ANY(...) RETURNING`), a step or a one-time claim is an
insert under a unique key, an event's `seq` comes from a per-execution counter row bumped in the same
statement as the event's insert (the row lock orders concurrent appends, and the statement's one
transaction leaves no gap).

Events reach listeners on other replicas by polling `list_events` on the primary key (the EventBus polls
each `poll_s`); no LISTEN/NOTIFY: it needs a dedicated connection per replica outside the pool and says
nothing a poll on an index does not, and a missed notification (a reconnect) would still need the poll.

Connections come from a pool (`pool_size`), each with a server-side `statement_timeout`; a lost server
raises `StoreUnavailable`, which the HTTP layer answers 503 with Retry-After. The schema is versioned
(postgres_schema.py) and migrated at `open()`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection
from contextvars import ContextVar
from typing import Any, TypeVar

import asyncpg

from agent_runtime.oe.store.base import (
    AuditRecord,
    EventRecord,
    ExecutionRecord,
    ExecutionState,
    Page,
    StepRecord,
)
from agent_runtime.oe.store.codec import decode_cursor, encode_cursor, encode_execution_changes, redact_uri
from agent_runtime.oe.store.outage import Outage
from agent_runtime.oe.store.postgres_deliveries import PostgresDeliveries
from agent_runtime.oe.store.postgres_leases import PostgresLeases
from agent_runtime.oe.store.postgres_ledger import PostgresLedger
from agent_runtime.oe.store.postgres_schema import (
    MIGRATION_LOCK_KEY,
    PARENT_ID,
    SCHEMA_VERSION_TABLE,
    check_version,
    pending,
)
from agent_runtime.oe.store.postgres_sessions import PostgresSessions
from agent_runtime.oe.store.postgres_transaction import ACQUIRE_TIMEOUT_S as _ACQUIRE_TIMEOUT_S
from agent_runtime.oe.store.postgres_transaction import UNAVAILABLE as _UNAVAILABLE
from agent_runtime.oe.store.postgres_transaction import Held, PostgresTransactions
from agent_runtime.oe.store.unavailable import StoreUnavailable
from agent_runtime.protocol import CallOutcome

T = TypeVar("T")

DEFAULT_POOL_SIZE = 10
DEFAULT_STATEMENT_TIMEOUT_S = 10.0
_CONNECT_TIMEOUT_S = 5.0

_CREATE_VERSION_TABLE = f"CREATE TABLE IF NOT EXISTS {SCHEMA_VERSION_TABLE} (version INTEGER NOT NULL)"
_INSERT_EXECUTION = (
    "INSERT INTO executions (execution_id, agent, project_id, status, created_at, fields) "
    "VALUES ($1, $2, $3, $4, $5, $6::jsonb) ON CONFLICT (execution_id) DO NOTHING"
)
_GET_EXECUTION = "SELECT fields FROM executions WHERE execution_id = $1"
_TRANSITION = (
    "UPDATE executions SET status = coalesce($3, status), fields = fields || $4::jsonb "
    "WHERE execution_id = $1 AND status = ANY($2::text[]) RETURNING fields"
)
_MATCH_STATUS = "SELECT fields FROM executions WHERE execution_id = $1 AND status = ANY($2::text[])"
_UPDATE_EXECUTION = "UPDATE executions SET fields = fields || $2::jsonb WHERE execution_id = $1"
_NOTE_STEP = (
    "UPDATE executions SET fields = fields || jsonb_build_object("
    "'step_count', greatest((fields->>'step_count')::int, $2)::text, 'updated_at', $3::text) "
    "WHERE execution_id = $1"
)
_COUNT_EXECUTIONS = "SELECT count(*) FROM executions"
_CLAIM_STEP = (
    "INSERT INTO steps (execution_id, step, state, outcome_status, fields) "
    "VALUES ($1, $2, $3, $4, $5::jsonb) ON CONFLICT (execution_id, step) DO NOTHING"
)
_GET_STEP = "SELECT fields FROM steps WHERE execution_id = $1 AND step = $2"
_FINISH_STEP = (
    "UPDATE steps SET state = 'done', outcome_status = $3, fields = fields || jsonb_build_object("
    "'state', '\"done\"', 'outcome', $4::text, 'updated_at', $5::text) "
    "WHERE execution_id = $1 AND step = $2"
)
# Only a step still in progress changes hands or goes: a done step is a cached result and stays as it is.
_RESET_STEP = (
    "UPDATE steps SET fields = fields || jsonb_build_object('owner', $3::text, 'updated_at', $4::text) "
    "WHERE execution_id = $1 AND step = $2 AND state = 'in_progress'"
)
# A held (suspend) outcome goes back to in progress for its approved call; the held payload stays.
_REOPEN_STEP = (
    "UPDATE steps SET state = 'in_progress', fields = fields || jsonb_build_object("
    "'state', '\"in_progress\"', 'owner', $3::text, 'run', $4::text, 'updated_at', $5::text) "
    "WHERE execution_id = $1 AND step = $2 AND state = 'done' AND outcome_status = 'suspend'"
)
_DELETE_STEP = "DELETE FROM steps WHERE execution_id = $1 AND step = $2 AND state = 'in_progress'"
_CLAIM_ONCE = "INSERT INTO claims (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING"
_GET_CLAIM = "SELECT value FROM claims WHERE key = $1"
# Records from before the chain (no seq) first, then the chain in seq order.
_LIST_AUDIT = "SELECT record FROM audit WHERE execution_id = $1 ORDER BY seq NULLS FIRST, id"
# One statement: the counter row's lock orders concurrent appends; the insert commits with the bump.
_APPEND_EVENT = (
    "WITH next AS ("
    "INSERT INTO event_seqs AS s (execution_id, seq) VALUES ($1, 1) "
    "ON CONFLICT (execution_id) DO UPDATE SET seq = s.seq + 1 RETURNING seq) "
    "INSERT INTO events (execution_id, seq, record) SELECT $1, next.seq, $2 FROM next RETURNING seq"
)
# LIMIT NULL is no limit.
_LIST_EVENTS = "SELECT seq, record FROM events WHERE execution_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
# Retention (issue 32): old stream events, a bounded batch, never an execution's latest.
_PRUNE_EVENTS = (
    "DELETE FROM events WHERE ctid IN (SELECT e.ctid FROM events AS e "
    "WHERE (e.record::jsonb ->> 'type') = ANY($1::text[]) AND (e.record::jsonb ->> 'at')::float8 < $2 "
    "AND e.seq < (SELECT max(seq) FROM events AS latest WHERE latest.execution_id = e.execution_id) "
    "LIMIT $3)"
)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _fields_json(record: ExecutionRecord | StepRecord) -> str:
    """The record as a jsonb object of field name -> that field's JSON text."""
    whole = json.loads(record.model_dump_json())
    return _dumps({name: _dumps(value) for name, value in whole.items()})


def _patch_json(encoded: dict[str, str]) -> str:
    return _dumps(encoded)


def _assemble(fields: str) -> str:
    """JSON text of a record from its stored fields (name -> JSON text)."""
    parts: dict[str, str] = json.loads(fields)
    return "{" + ",".join(f"{_dumps(name)}:{text}" for name, text in parts.items()) + "}"


def _execution(fields: str) -> ExecutionRecord:
    return ExecutionRecord.model_validate_json(_assemble(fields))


def _step(fields: str) -> StepRecord:
    return StepRecord.model_validate_json(_assemble(fields))


class PostgresStore(
    PostgresTransactions, PostgresLedger, PostgresDeliveries, PostgresLeases, PostgresSessions
):
    """`Store` over a PostgreSQL database; `dsn` may hold credentials and never appears in messages."""

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        statement_timeout_s: float = DEFAULT_STATEMENT_TIMEOUT_S,
    ) -> None:
        self._dsn = dsn
        self.pool_size = pool_size
        self.statement_timeout_s = statement_timeout_s
        self._pool: asyncpg.Pool | None = None
        # The server as the calls find it: one warning per outage, /readyz 503 while it lasts.
        self.outage = Outage("PostgreSQL")
        # The connection of the `atomic()` block a task is in (postgres_transaction.py).
        self._tx: ContextVar[Held | None] = ContextVar(f"postgres-transaction-{id(self)}", default=None)

    def __repr__(self) -> str:
        return f"PostgresStore({redact_uri(self._dsn)!r})"

    # plumbing

    async def _call(self, use: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        if self._pool is None:
            raise RuntimeError("PostgresStore is not open: await store.open() first")
        problem: BaseException | None = None
        held = self._held()
        try:
            if held is not None:
                return await use(held)  # inside `atomic()`: its transaction's connection
            async with self._pool.acquire(timeout=_ACQUIRE_TIMEOUT_S) as conn:
                answer = await use(conn)
        except _UNAVAILABLE as exc:
            problem = exc
        else:
            if self.outage.since is not None:
                self.outage.answered()
            return answer
        self.outage.lost(type(problem).__name__)
        # Raised outside the except block: asyncpg's message may quote the DSN's host, never its password.
        raise StoreUnavailable(f"PostgreSQL is unavailable ({type(problem).__name__})")

    async def _execute(self, sql: str, *args: Any) -> str:
        return await self._call(lambda conn: conn.execute(sql, *args))

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        return await self._call(lambda conn: conn.fetchval(sql, *args))

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        return await self._call(lambda conn: conn.fetch(sql, *args))

    async def _fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None:
        return await self._call(lambda conn: conn.fetchrow(sql, *args))

    async def open(self) -> None:
        """Connect the pool, then apply the schema's pending migrations; idempotent."""
        if self._pool is not None:
            return
        timeout_ms = str(int(self.statement_timeout_s * 1000))
        problem = ""
        try:
            pool = await asyncpg.create_pool(
                self._dsn,
                # No floor: asyncpg restores one in a task that logs a traceback at every failed try while
                # the server is away; the store's Outage says it once instead.
                min_size=0,
                max_size=self.pool_size,
                # The client's own limits: a partition that loses packets never answers the server's.
                timeout=_CONNECT_TIMEOUT_S,
                command_timeout=self.statement_timeout_s + 1,
                server_settings={"statement_timeout": timeout_ms, "application_name": "agent-engine-oe"},
            )
            try:
                async with pool.acquire(timeout=_ACQUIRE_TIMEOUT_S):
                    pass  # the first connection: an unreachable server or a refused password shows here
            except BaseException:
                await pool.close()
                raise
        except _UNAVAILABLE as exc:
            problem = f"cannot reach it ({type(exc).__name__})"
        except asyncpg.InvalidPasswordError:
            problem = "the server refused the user or password"
        except asyncpg.InvalidCatalogNameError:
            problem = "the database does not exist"
        except (asyncpg.PostgresError, ValueError) as exc:
            problem = f"{type(exc).__name__}"
        if problem:
            raise StoreUnavailable(f"OE_POSTGRES_URL ({redact_uri(self._dsn)}): {problem}")
        self._pool = pool
        try:
            await self._migrate()
        except BaseException:
            await self.close()
            raise

    async def _migrate(self) -> None:
        assert self._pool is not None
        async with self._pool.acquire() as conn, conn.transaction():
            # Replicas starting at once: one migrates, the others wait and then find nothing to do.
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {SCHEMA_VERSION_TABLE} (version INTEGER NOT NULL)"
            )
            found = await conn.fetchval(f"SELECT max(version) FROM {SCHEMA_VERSION_TABLE}")  # noqa: S608
            found = int(found or 0)
            check_version(found)
            for number, sql in pending(found):
                await conn.execute(sql)
                await conn.execute(f"INSERT INTO {SCHEMA_VERSION_TABLE} (version) VALUES ($1)", number)  # noqa: S608

    async def schema_version(self) -> int:
        """The schema version the database is at."""
        found = await self._fetchval(f"SELECT max(version) FROM {SCHEMA_VERSION_TABLE}")  # noqa: S608
        return int(found or 0)

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    # executions

    async def create_execution(self, record: ExecutionRecord) -> None:
        done = await self._execute(
            _INSERT_EXECUTION,
            record.execution_id,
            record.agent,
            record.project_id,
            record.status.value,
            record.created_at,
            _fields_json(record),
        )
        if done.endswith(" 0"):
            raise KeyError(record.execution_id)

    async def get_execution(self, execution_id: str) -> ExecutionRecord | None:
        fields = await self._fetchval(_GET_EXECUTION, execution_id)
        return None if fields is None else _execution(fields)

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
            fields = await self._fetchval(_MATCH_STATUS, execution_id, states)
        else:
            status = json.loads(encoded["status"]) if "status" in encoded else None
            fields = await self._fetchval(_TRANSITION, execution_id, states, status, _patch_json(encoded))
        return None if fields is None else _execution(fields)

    async def update_execution(self, execution_id: str, changes: dict[str, Any]) -> None:
        encoded = encode_execution_changes(changes, allow_status=False)
        if encoded:
            await self._execute(_UPDATE_EXECUTION, execution_id, _patch_json(encoded))

    async def note_step(self, execution_id: str, step: int, *, at: float) -> None:
        await self._execute(_NOTE_STEP, execution_id, int(step), json.dumps(float(at)))

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
        where: list[str] = []
        params: list[Any] = []

        def param(value: Any) -> str:
            params.append(value)
            return f"${len(params)}"

        if agent is not None:
            where.append(f"agent = {param(agent)}")
        if project_id is not None:
            where.append(f"project_id = {param(project_id)}")
        if project_ids is not None:
            where.append(f"project_id = ANY({param(sorted(project_ids))}::text[])")
        if status is not None:
            where.append(f"status = {param(ExecutionState(status).value)}")
        if parent_execution_id is not None:
            # The expression of migration 5's index (postgres_schema.py), so the index serves it.
            where.append(f"{PARENT_ID} = {param(parent_execution_id)}")
        if cursor is not None:
            created_at, last_id = decode_cursor(cursor)
            where.append(f"(created_at, execution_id) < ({param(created_at)}, {param(last_id)})")
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        # Only fixed fragments and placeholders are formatted into the text.
        sql = (
            f"SELECT fields FROM executions {clause}"  # noqa: S608
            f"ORDER BY created_at DESC, execution_id DESC LIMIT {param(limit + 1)}"
        )
        rows = await self._fetch(sql, *params)
        items = [_execution(row[0]) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            next_cursor = encode_cursor(items[-1].created_at, items[-1].execution_id)
        return Page(items=items, next_cursor=next_cursor)

    async def count_executions(self) -> int:
        return int(await self._fetchval(_COUNT_EXECUTIONS))

    # steps

    async def claim_step(self, record: StepRecord) -> StepRecord | None:
        fields = _fields_json(record)
        outcome_status = None if record.outcome is None else record.outcome.status

        async def claim(conn: asyncpg.Connection) -> StepRecord | None:
            # Loop only if the winner's row was deleted between our insert and our read.
            while True:
                done = await conn.execute(
                    _CLAIM_STEP, record.execution_id, record.step, record.state, outcome_status, fields
                )
                if done.endswith(" 1"):
                    return None
                existing = await conn.fetchval(_GET_STEP, record.execution_id, record.step)
                if existing is not None:
                    return _step(existing)

        return await self._call(claim)

    async def get_step(self, execution_id: str, step: int) -> StepRecord | None:
        fields = await self._fetchval(_GET_STEP, execution_id, step)
        return None if fields is None else _step(fields)

    async def finish_step(self, execution_id: str, step: int, outcome: CallOutcome, *, at: float) -> None:
        await self._execute(
            _FINISH_STEP, execution_id, step, outcome.status, outcome.model_dump_json(), json.dumps(float(at))
        )

    async def reset_step(self, execution_id: str, step: int, *, owner: str, at: float) -> None:
        await self._execute(_RESET_STEP, execution_id, step, _dumps(owner), json.dumps(float(at)))

    async def reopen_step(self, execution_id: str, step: int, *, owner: str, run: int, at: float) -> bool:
        done = await self._execute(
            _REOPEN_STEP, execution_id, step, _dumps(owner), str(int(run)), json.dumps(float(at))
        )
        return done.endswith(" 1")

    async def delete_step(self, execution_id: str, step: int) -> None:
        await self._execute(_DELETE_STEP, execution_id, step)

    # one-time claims

    async def claim_once(self, key: str, value: dict[str, Any]) -> dict[str, Any] | None:
        text = json.dumps(value, separators=(",", ":"))

        async def claim(conn: asyncpg.Connection) -> dict[str, Any] | None:
            if (await conn.execute(_CLAIM_ONCE, key, text)).endswith(" 1"):
                return None
            stored: dict[str, Any] = json.loads(await conn.fetchval(_GET_CLAIM, key))
            return stored

        return await self._call(claim)

    # audit log

    # append_audit: PostgresLedger (the hash chain)

    async def list_audit(self, execution_id: str) -> list[AuditRecord]:
        rows = await self._fetch(_LIST_AUDIT, execution_id)
        return [AuditRecord.model_validate_json(row[0]) for row in rows]

    # events

    async def append_event(
        self, execution_id: str, *, type: str, step: int | None, data: dict[str, Any], at: float
    ) -> EventRecord:
        record = EventRecord(execution_id=execution_id, seq=0, type=type, step=step, data=data, at=at)
        seq = await self._fetchval(_APPEND_EVENT, execution_id, record.model_dump_json())
        record.seq = int(seq)
        return record

    async def list_events(
        self, execution_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[EventRecord]:
        rows = await self._fetch(_LIST_EVENTS, execution_id, after_seq, limit)
        events = []
        for seq, text in rows:
            # Stored with seq 0: the number is the row's, given by the counter in the same statement.
            event = EventRecord.model_validate_json(text)
            event.seq = int(seq)
            events.append(event)
        return events

    async def prune_events(self, *, types: Collection[str], before: float, limit: int) -> int:
        status = await self._execute(_PRUNE_EVENTS, sorted(types), before, limit)
        return int(status.rsplit(" ", 1)[-1])  # "DELETE n"
