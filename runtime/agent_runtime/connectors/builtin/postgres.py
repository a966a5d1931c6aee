"""`postgres`: an external PostgreSQL database through asyncpg (`postgres.query`, `postgres.execute`).

Reads are parsed by PostgreSQL's own grammar first (`_pg_readonly`), then run as `BEGIN READ ONLY` under
the session's statement timeout and rolled back, then `DISCARD ALL` resets the session (locks, settings,
prepared statements, temporary tables) before the connection goes back to the pool. A SELECT runs wrapped
so the server cuts every variable-length cell (`_pg_bounded`); rows come from a server-side cursor in
chunks, `limit + 1` at most, within the result's byte budget. Every statement goes through the extended
protocol (prepared), which itself refuses a second command.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping, Sequence
from typing import Any

from agent_runtime.connectors.builtin._pg_bounded import bounded_select
from agent_runtime.connectors.builtin._pg_readonly import parse_read
from agent_runtime.connectors.builtin._sql import (
    CELL_CUT_CHARS,
    FETCH_CHUNK_ROWS,
    BaseSqlConnector,
    ResultBudget,
    sql_config_schema,
    sql_tools,
)
from agent_runtime.connectors.framework import (
    QUERY_ERROR,
    READ_ONLY_VIOLATION,
    BuiltinToolError,
)


def _asyncpg() -> Any:
    try:
        import asyncpg
    except ImportError:  # pragma: no cover - the runtime extra installs it
        raise BuiltinToolError(
            "internal", "the postgres connector needs the asyncpg package (the runtime extra installs it)"
        ) from None
    return asyncpg


class PostgresConnector(BaseSqlConnector):
    type = "postgres"
    description = "An external PostgreSQL database: guarded read-only queries and approved writes."
    dialect = "postgres"
    config_schema = sql_config_schema(default_port=5432)
    tools = sql_tools("postgres", "PostgreSQL")

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._pool: Any = None
        self._pool_loop: asyncio.AbstractEventLoop | None = None
        self._pool_lock: asyncio.Lock | None = None

    async def _get_pool(self, env: Mapping[str, str]) -> Any:
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._pool_loop is loop:
            return self._pool
        if self._pool_lock is None or self._pool_loop is not loop:
            self._pool_lock, self._pool, self._pool_loop = asyncio.Lock(), None, loop
        async with self._pool_lock:
            if self._pool is None:
                asyncpg = _asyncpg()
                config = self.config
                try:
                    self._pool = await asyncpg.create_pool(
                        host=config["host"],
                        port=config["port"],
                        database=config["database"],
                        user=config["user"],
                        password=self.secret("password", env, required=False),
                        ssl=_ssl(config["tls"]),
                        timeout=config["connect_timeout_s"],
                        min_size=0,
                        max_size=config["max_connections"],
                        # DISCARD ALL on every release (instead of asyncpg's own reset) drops prepared
                        # statements: keep none cached.
                        statement_cache_size=0,
                        reset=_reset_session,
                        # The guard lexes with standard strings (a backslash is a plain character); the
                        # statement timeout is the session's default, so no call spends a round trip on it.
                        server_settings={
                            "standard_conforming_strings": "on",
                            "application_name": "agent-engine",
                            "statement_timeout": str(int(config["statement_timeout_s"] * 1000)),
                        },
                    )
                except Exception as exc:
                    raise self._classify(exc) from None
        return self._pool

    async def _read(
        self, sql: str, params: Sequence[Any], *, limit: int, env: Mapping[str, str]
    ) -> tuple[list[str], list[Sequence[Any]], bool]:
        parsed = parse_read(sql)
        kind = parsed.kind
        # libpg_query's locations are byte offsets; the statement without its trailing `;` or comments.
        raw = sql.encode()
        length = parsed.length if parsed.length is not None else len(raw) - parsed.location
        text = raw[parsed.location : parsed.location + length].decode()
        pool = await self._get_pool(env)
        try:
            async with pool.acquire() as conn:
                transaction = conn.transaction(readonly=True)
                await transaction.start()
                try:
                    statement = await conn.prepare(text)
                    attributes = statement.get_attributes()
                    columns = [attr.name for attr in attributes]
                    if kind == "SelectStmt" and attributes:
                        # The server cuts every variable-length cell before it is sent.
                        wrapped = bounded_select(
                            text,
                            [(a.name, _type_name(a.type)) for a in attributes],
                            cut_chars=CELL_CUT_CHARS,
                        )
                        parse_read(wrapped)
                        statement = await conn.prepare(wrapped)
                    cursor = await statement.cursor(*params)
                    rows, budget_hit = await _fetch_within_budget(cursor, limit=limit)
                finally:
                    await transaction.rollback()  # a read leaves nothing behind, whatever happened
        except BuiltinToolError:
            raise
        except Exception as exc:
            raise self._classify(exc) from None
        return columns, rows, budget_hit

    async def _write(self, sql: str, params: Sequence[Any], *, env: Mapping[str, str]) -> dict[str, Any]:
        pool = await self._get_pool(env)
        try:
            async with pool.acquire() as conn, conn.transaction():
                statement = await conn.prepare(sql)
                rows = await statement.fetch(*params)
                status = statement.get_statusmsg() or ""
        except BuiltinToolError:
            raise
        except Exception as exc:
            raise self._classify(exc) from None
        parts = status.split()
        affected = int(parts[-1]) if parts and parts[-1].isdigit() else None
        return {
            "status": status,
            "rows_affected": affected,
            "returned": [list(map(str, r)) for r in rows[:100]],
        }

    read_only_fix = (
        "Fix: connect as a read-only role: CREATE ROLE agent_ro LOGIN PASSWORD '...'; "
        "GRANT USAGE ON SCHEMA public TO agent_ro; GRANT SELECT ON ALL TABLES IN SCHEMA public TO agent_ro"
    )

    async def _privilege_problems(self, env: Mapping[str, str]) -> list[str]:
        pool = await self._get_pool(env)
        try:
            async with pool.acquire() as conn:
                role = await conn.fetchrow(_PG_ROLE)
                writable = await conn.fetchval(_PG_WRITABLE)
        except Exception as exc:
            raise self._classify(exc) from None
        problems = []
        if role["rolsuper"]:
            problems.append("is a superuser (bypasses READ ONLY, may read files and end other sessions)")
        files = [
            name
            for name in ("read_server_files", "write_server_files", "execute_server_program")
            if role[name]
        ]
        if files:
            problems.append(f"holds file access ({', '.join('pg_' + f for f in files)})")
        if role["signal_backend"]:
            problems.append("holds pg_signal_backend (may cancel or end other sessions)")
        if writable:
            problems.append(f"can write ({writable} tables with INSERT, UPDATE, DELETE or TRUNCATE)")
        return problems

    async def _ping(self, env: Mapping[str, str]) -> None:
        pool = await self._get_pool(env)
        try:
            async with pool.acquire() as conn:
                await conn.fetchval("SELECT 1")
        except Exception as exc:
            raise self._classify(exc) from None

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None and self._pool_loop is asyncio.get_running_loop():
            await pool.close()

    def _classify(self, exc: BaseException) -> BuiltinToolError:
        """A driver failure as a category; the server's message is kept only for statement errors."""
        asyncpg = _asyncpg()
        where = f"PostgreSQL at {self.config['host']}:{self.config['port']}"
        if isinstance(exc, asyncpg.ReadOnlySQLTransactionError):
            return BuiltinToolError(
                READ_ONLY_VIOLATION, "the database refused a write inside a read-only query"
            )
        if isinstance(exc, asyncpg.InvalidAuthorizationSpecificationError | asyncpg.InvalidPasswordError):
            return BuiltinToolError(
                "auth", f"{where} refused the credential of user {self.config['user']!r}; check the Secret"
            )
        if isinstance(exc, asyncpg.InsufficientPrivilegeError):
            return BuiltinToolError("forbidden", f"the database user may not do this: {_message(exc)}")
        if isinstance(exc, asyncpg.QueryCanceledError):
            return BuiltinToolError(
                "timeout",
                f"the statement ran longer than {self.config['statement_timeout_s']:g} s and was stopped",
            )
        if isinstance(exc, asyncpg.PostgresError):
            return BuiltinToolError(QUERY_ERROR, f"the database refused the statement: {_message(exc)}")
        if isinstance(exc, TimeoutError):
            return BuiltinToolError("timeout", f"{where} did not answer in time")
        if isinstance(exc, OSError | asyncpg.InterfaceError | ConnectionError):
            return BuiltinToolError("connection", f"{where} could not be reached ({type(exc).__name__})")
        return BuiltinToolError("internal", f"the postgres call failed ({type(exc).__name__})")


_PG_ROLE = (
    "SELECT rolsuper, pg_has_role('pg_read_server_files', 'MEMBER') AS read_server_files, "
    "pg_has_role('pg_write_server_files', 'MEMBER') AS write_server_files, "
    "pg_has_role('pg_execute_server_program', 'MEMBER') AS execute_server_program, "
    "pg_has_role('pg_signal_backend', 'MEMBER') AS signal_backend FROM pg_roles WHERE rolname = current_user"
)
_PG_WRITABLE = (
    "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
    "AND n.nspname NOT LIKE 'pg_toast%' AND (has_table_privilege(c.oid, 'INSERT') "
    "OR has_table_privilege(c.oid, 'UPDATE') OR has_table_privilege(c.oid, 'DELETE') "
    "OR has_table_privilege(c.oid, 'TRUNCATE'))"
)


def _type_name(data_type: Any) -> str:
    """A column type's name when it is PostgreSQL's own (pg_catalog), else a name no rule matches."""
    return str(data_type.name) if data_type.schema == "pg_catalog" else f"{data_type.schema}.{data_type.name}"


async def _fetch_within_budget(cursor: Any, *, limit: int) -> tuple[list[Sequence[Any]], bool]:
    """At most `limit` rows, in chunks, stopping once the result's byte budget is spent."""
    budget = ResultBudget()
    rows: list[Sequence[Any]] = []
    while len(rows) < limit:
        chunk = await cursor.fetch(min(FETCH_CHUNK_ROWS, limit - len(rows)))
        if not chunk:
            break
        for row in chunk:
            if not budget.take(row):
                return rows, True
            rows.append(tuple(row))
    return rows, False


async def _reset_session(conn: Any) -> None:
    """The pool's reset on every release: DISCARD ALL, so no lock, setting, prepared statement or temporary
    table outlives a call (when it fails, the pool closes the connection)."""
    await conn.execute("DISCARD ALL")


def _message(exc: BaseException) -> str:
    text = " ".join(str(getattr(exc, "message", "") or exc).split())
    return text[:300]


def _ssl(mode: str) -> Any:
    if mode == "disable":
        return False
    context = ssl.create_default_context()
    if mode == "require":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
