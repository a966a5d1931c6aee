"""`mysql`: an external MySQL or MariaDB database through aiomysql (`mysql.query`, `mysql.execute`).

Reads are parsed first (`_mysql_readonly`: the exact lexer strips comments, sqlglot parses), then run as
`START TRANSACTION READ ONLY` with a statement time limit on a connection of their own, which is closed
after the call (COM_QUIT): no named lock, user variable or LAST_INSERT_ID reaches another call, and the
unfinished transaction ends with it. Rows come from an unbuffered result read off the wire with each cell
cut as it arrives (`_mysql_rows`), `limit + 1` at most, within the result's byte budget. `%s`
placeholders are bound here, outside literals only. Connections are opened without the multi-statements
capability (aiomysql always asks for it), so the server itself refuses `a; b`. The session's sql_mode is
pinned to what the guard's lexer assumes."""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from agent_runtime.connectors.builtin._mysql_readonly import bind
from agent_runtime.connectors.builtin._mysql_rows import read_row
from agent_runtime.connectors.builtin._sql import (
    CELL_CUT_BYTES,
    BaseSqlConnector,
    ResultBudget,
    sql_config_schema,
    sql_tools,
)
from agent_runtime.connectors.builtin._sqlguard import SqlRefused
from agent_runtime.connectors.framework import (
    QUERY_ERROR,
    QUERY_REFUSED,
    READ_ONLY_VIOLATION,
    BuiltinToolError,
)

# No ANSI_QUOTES ("..." stays a string) and no NO_BACKSLASH_ESCAPES (\' stays an escape): the guard's lexer.
SQL_MODE = "STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION,ONLY_FULL_GROUP_BY"
_AUTH_CODES = frozenset((1045, 1044, 1698))
_FORBIDDEN_CODES = frozenset((1142, 1143, 1227, 1370))
_READ_ONLY_CODES = frozenset((1792, 1290))  # write in a READ ONLY transaction; --read-only server
_TIMEOUT_CODES = frozenset((1969, 3024, 1317))  # max_statement_time (MariaDB), MAX_EXECUTION_TIME, killed
_CONNECT_CODES = frozenset((2002, 2003, 2005, 2006, 2013, 2055))


class MysqlConnector(BaseSqlConnector):
    type = "mysql"
    description = "An external MySQL or MariaDB database: guarded read-only queries and approved writes."
    dialect = "mysql"
    config_schema = sql_config_schema(default_port=3306)
    tools = sql_tools("mysql", "MySQL/MariaDB")

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _open(self, env: Mapping[str, str]) -> Any:
        import aiomysql
        from pymysql.constants import CLIENT

        config = self.config
        conn = aiomysql.Connection(
            host=config["host"],
            port=config["port"],
            user=config["user"],
            password=self.secret("password", env, required=False) or "",
            db=config["database"],
            connect_timeout=config["connect_timeout_s"],
            autocommit=False,
            sql_mode=f"'{SQL_MODE}'",  # aiomysql sends it unquoted
            charset="utf8mb4",
            ssl=_ssl(config["tls"]),
            local_infile=False,
        )
        # aiomysql.connect() always adds CLIENT.MULTI_STATEMENTS; built by hand, the flag comes off before
        # the handshake (aiomysql has no public switch for it).
        conn.client_flag &= ~CLIENT.MULTI_STATEMENTS
        await conn._connect()
        conn._agent_mariadb = "mariadb" in (conn.get_server_info() or "").lower()
        return conn

    @contextlib.asynccontextmanager
    async def _connection(self, env: Mapping[str, str]) -> AsyncIterator[Any]:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._loop is not loop:
            self._slots, self._loop = asyncio.Semaphore(self.config["max_connections"]), loop
        async with self._slots:
            try:
                conn = await asyncio.wait_for(self._open(env), self.config["connect_timeout_s"] + 1)
            except BuiltinToolError:
                raise
            except Exception as exc:
                raise self._classify(exc) from None
            try:
                yield conn
            finally:
                # Never reused: a fresh session per call leaves no lock, variable or LAST_INSERT_ID behind.
                await _quit(conn)

    async def _limit_time(self, cursor: Any, conn: Any) -> None:
        seconds = float(self.config["statement_timeout_s"])
        if conn._agent_mariadb:
            await cursor.execute(f"SET SESSION max_statement_time = {seconds:.3f}")
        else:
            await cursor.execute(f"SET SESSION MAX_EXECUTION_TIME = {int(seconds * 1000)}")

    async def _read(
        self, sql: str, params: Sequence[Any], *, limit: int, env: Mapping[str, str]
    ) -> tuple[list[str], list[Sequence[Any]], bool]:
        import aiomysql

        budget = float(self.config["statement_timeout_s"]) + 5
        try:
            async with self._connection(env) as conn:
                async with asyncio.timeout(budget):
                    text = bind(sql, params, conn.escape)
                    cursor = await conn.cursor(aiomysql.SSCursor)
                    await self._limit_time(cursor, conn)
                    await cursor.execute("START TRANSACTION READ ONLY")
                    await cursor.execute(text)
                    columns = [d[0] for d in cursor.description or ()]
                    rows, budget_hit = await _stream_rows(conn, cursor, limit=limit)
                    # No rollback or drain: the connection is closed after every call, which ends the
                    # transaction and drops whatever the server still had to send.
        except SqlRefused as exc:
            raise BuiltinToolError(QUERY_REFUSED, f"refused before it reached the database: {exc}") from None
        except BuiltinToolError:
            raise
        except Exception as exc:
            raise self._classify(exc) from None
        return columns, rows, budget_hit

    async def _write(self, sql: str, params: Sequence[Any], *, env: Mapping[str, str]) -> dict[str, Any]:
        budget = float(self.config["statement_timeout_s"]) + 5
        try:
            async with self._connection(env) as conn:
                try:
                    async with asyncio.timeout(budget):
                        cursor = await conn.cursor()
                        await self._limit_time(cursor, conn)
                        await conn.begin()
                        try:
                            affected = await cursor.execute(bind(sql, params, conn.escape))
                            await conn.commit()
                        except BaseException:
                            await conn.rollback()
                            raise
                        last_id = cursor.lastrowid
                        await cursor.close()
                except BaseException:
                    conn.close()
                    raise
        except SqlRefused as exc:
            raise BuiltinToolError(QUERY_REFUSED, f"refused before it reached the database: {exc}") from None
        except BuiltinToolError:
            raise
        except Exception as exc:
            raise self._classify(exc) from None
        return {"status": "OK", "rows_affected": affected, "last_insert_id": last_id or None}

    read_only_fix = (
        "Fix: connect as a read-only user: CREATE USER 'agent_ro'@'%' IDENTIFIED BY '...'; "
        "GRANT SELECT, SHOW VIEW ON shop.* TO 'agent_ro'@'%' (with your database for shop)"
    )

    async def _privilege_problems(self, env: Mapping[str, str]) -> list[str]:
        try:
            async with self._connection(env) as conn:
                cursor = await conn.cursor()
                await cursor.execute("SHOW GRANTS")
                grants = [str(row[0]) for row in await cursor.fetchall()]
                await cursor.close()
        except BuiltinToolError:
            raise
        except Exception as exc:
            raise self._classify(exc) from None
        return grant_problems(grants)

    async def _ping(self, env: Mapping[str, str]) -> None:
        try:
            async with self._connection(env) as conn:
                cursor = await conn.cursor()
                await cursor.execute("SELECT 1")
                await cursor.close()
        except BuiltinToolError:
            raise
        except Exception as exc:
            raise self._classify(exc) from None

    async def aclose(self) -> None:
        """Nothing pooled: every call closes its own connection."""

    def _classify(self, exc: BaseException) -> BuiltinToolError:
        import pymysql

        where = f"MySQL at {self.config['host']}:{self.config['port']}"
        code = exc.args[0] if isinstance(exc, pymysql.err.MySQLError) and exc.args else None
        if code in _READ_ONLY_CODES:
            return BuiltinToolError(
                READ_ONLY_VIOLATION, "the database refused a write inside a read-only query"
            )
        if code in _AUTH_CODES:
            return BuiltinToolError(
                "auth", f"{where} refused the credential of user {self.config['user']!r}; check the Secret"
            )
        if code in _FORBIDDEN_CODES:
            return BuiltinToolError("forbidden", f"the database user may not do this: {_message(exc)}")
        if code in _TIMEOUT_CODES:
            return BuiltinToolError(
                "timeout",
                f"the statement ran longer than {self.config['statement_timeout_s']:g} s and was stopped",
            )
        if code in _CONNECT_CODES or isinstance(exc, OSError | ConnectionError):
            return BuiltinToolError("connection", f"{where} could not be reached ({type(exc).__name__})")
        if isinstance(exc, TimeoutError):
            return BuiltinToolError("timeout", f"{where} did not answer in time")
        if isinstance(exc, pymysql.err.MySQLError):
            return BuiltinToolError(QUERY_ERROR, f"the database refused the statement: {_message(exc)}")
        return BuiltinToolError("internal", f"the mysql call failed ({type(exc).__name__})")


_GRANT = re.compile(r"^GRANT (?P<privileges>.+?) ON (?P<target>\S+) TO ", re.IGNORECASE)
_WRITE_PRIVILEGES = ("ALL", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "INDEX", "TRIGGER")


def grant_problems(grants: list[str]) -> list[str]:
    """What SHOW GRANTS says the user may do that a query connector must not."""
    problems: list[str] = []
    for grant in grants:
        match = _GRANT.match(grant)
        if match is None:
            continue
        privileges = [p.strip().upper() for p in match["privileges"].split(",")]
        everywhere = match["target"] == "*.*"
        if everywhere and any(p in ("ALL", "ALL PRIVILEGES", "SUPER") for p in privileges):
            problems.append("holds SUPER or ALL on *.* (a superuser)")
        if everywhere and "FILE" in privileges:
            problems.append("holds FILE (may read and write the server's files)")
        if any(p.split(" ")[0] in _WRITE_PRIVILEGES for p in privileges):
            problems.append(f"can write (GRANT {match['privileges']} ON {match['target']})")
    return list(dict.fromkeys(problems))


async def _quit(conn: Any) -> None:
    """COM_QUIT when the connection is clean (the server ends the session at once), else just close."""
    if conn.closed or (getattr(conn, "_result", None) is not None and conn._result.unbuffered_active):
        conn.close()
        return
    try:
        await asyncio.wait_for(conn.ensure_closed(), 2)
    except Exception:
        conn.close()


async def _stream_rows(conn: Any, cursor: Any, *, limit: int) -> tuple[list[Sequence[Any]], bool]:
    """At most `limit` rows, each cell cut on the wire, stopping once the byte budget is spent."""
    result = cursor._result
    if result is None or not getattr(result, "unbuffered_active", False):
        return [], False
    budget = ResultBudget()
    rows: list[Sequence[Any]] = []
    while len(rows) < limit:
        row = await read_row(conn, result.converters, cut_bytes=CELL_CUT_BYTES)
        if row is None:
            result.unbuffered_active = False
            break
        if not budget.take(row):
            return rows, True
        rows.append(row)
    return rows, False


def _message(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    text = str(args[1]) if len(args) > 1 else str(exc)
    return " ".join(text.split())[:300]


def _ssl(mode: str) -> Any:
    if mode == "disable":
        return None
    context = ssl.create_default_context()
    if mode == "require":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
