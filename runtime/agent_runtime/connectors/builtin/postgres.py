"""`postgres`: an external PostgreSQL database through asyncpg (`postgres.query`, `postgres.execute`).

Reads run as `BEGIN READ ONLY` under the session's statement timeout and are rolled back; rows come from a
server-side cursor, `limit + 1` at most. Every statement goes through the extended protocol (prepared),
which itself refuses a second command: a third line of defence behind the guard and the READ ONLY
transaction.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping, Sequence
from typing import Any

from agent_runtime.connectors.builtin._sql import BaseSqlConnector, sql_config_schema, sql_tools
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
    ) -> tuple[list[str], list[Sequence[Any]]]:
        pool = await self._get_pool(env)
        try:
            async with pool.acquire() as conn:
                transaction = conn.transaction(readonly=True)
                await transaction.start()
                try:
                    statement = await conn.prepare(sql)
                    columns = [attr.name for attr in statement.get_attributes()]
                    cursor = await statement.cursor(*params)
                    rows = await cursor.fetch(limit)
                finally:
                    await transaction.rollback()  # a read leaves nothing behind, whatever happened
        except BuiltinToolError:
            raise
        except Exception as exc:
            raise self._classify(exc) from None
        return columns, [tuple(row) for row in rows]

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
