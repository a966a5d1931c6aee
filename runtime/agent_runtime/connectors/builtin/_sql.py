"""`BaseSqlConnector`: what postgres and mysql share (C-06): the guard, row caps, result shape, errors.

`<type>.query` runs one read (SELECT, WITH, TABLE, VALUES, EXPLAIN without ANALYZE, SHOW) that the engine's
parser accepted (`_sqlguard.check_read`), inside a READ ONLY transaction that never commits, with the
session reset after it; it returns at most `limit` rows (default 100, hard cap 1,000) within a byte budget,
each cell cut before it reaches this process, and `truncated` when more matched. `<type>.execute` runs one
statement (chaining refused) in a transaction of its own and commits; `read_only: true` refuses it.
`test_connection` reports a role stronger than a read needs (category `privileges`)"""

from __future__ import annotations

import base64
import datetime
import decimal
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from agent_runtime.connectors.builtin._sqlguard import Dialect, SqlRefused, check_read, check_single
from agent_runtime.connectors.framework import (
    QUERY_REFUSED,
    BuiltinConnector,
    BuiltinToolError,
    TestResult,
    tool,
)

DEFAULT_LIMIT = 100
PRIVILEGES = "privileges"  # test_connection's category for a role stronger than a read-only connector needs
HARD_LIMIT = 1000
MAX_CELL_CHARS = 10_000
# What the server sends of one cell: one character more than is shown (so the cut is seen), or for MySQL,
# which counts bytes on the wire, enough bytes for that many characters of 4-byte UTF-8.
CELL_CUT_CHARS = MAX_CELL_CHARS + 1
CELL_CUT_BYTES = 4 * MAX_CELL_CHARS + 4
FETCH_CHUNK_ROWS = 50
# The most a result may hold in memory before it is cut (`truncated`), whatever `limit` asks.
RESULT_BUDGET_BYTES = 4 * 1024 * 1024


class ResultBudget:
    """Counts a result's bytes as rows arrive; the first row is always taken."""

    def __init__(self, limit: int = RESULT_BUDGET_BYTES) -> None:
        self.left = limit
        self.rows = 0

    def take(self, row: Sequence[Any]) -> bool:
        size = sum(_cell_bytes(value) for value in row)
        if self.rows and size > self.left:
            return False
        self.left -= size
        self.rows += 1
        return True


def _cell_bytes(value: Any) -> int:
    if isinstance(value, str | bytes | bytearray):
        return len(value) + 8
    return 16


def sql_config_schema(*, default_port: int) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["host", "database", "user"],
        "additionalProperties": False,
        "properties": {
            "host": {"type": "string", "minLength": 1, "maxLength": 253, "description": "server host name"},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535, "default": default_port},
            "database": {"type": "string", "minLength": 1, "maxLength": 128},
            "user": {"type": "string", "minLength": 1, "maxLength": 128},
            "tls": {
                "type": "string",
                "enum": ["disable", "require", "verify"],
                "default": "disable",
                "description": "disable, require (encrypt), verify (encrypt and verify the certificate)",
            },
            "connect_timeout_s": {"type": "number", "minimum": 0.1, "maximum": 60, "default": 10},
            "statement_timeout_s": {"type": "number", "minimum": 0.1, "maximum": 300, "default": 15},
            "default_limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": HARD_LIMIT,
                "default": DEFAULT_LIMIT,
            },
            "max_connections": {"type": "integer", "minimum": 1, "maximum": 32, "default": 4},
            "read_only": {
                "type": "boolean",
                "default": False,
                "description": "only `query`: `execute` is refused and test_connection reports a role "
                "that can write",
            },
        },
    }


def sql_tools(prefix: str, engine: str) -> tuple[Any, ...]:
    params = {
        "type": "array",
        "maxItems": 100,
        "description": "values for the statement's placeholders, in order",
        "items": {"type": ["string", "number", "integer", "boolean", "null"]},
    }
    placeholder = "$1, $2, ..." if prefix == "postgres" else "%s"
    return (
        tool(
            f"{prefix}.query",
            f"Run one read-only SELECT (or WITH, TABLE, VALUES, EXPLAIN, SHOW) on the {engine} database, "
            f"inside a READ ONLY transaction; placeholders are {placeholder}. Returns columns and rows, "
            f"at most `limit` rows (default {DEFAULT_LIMIT}, at most {HARD_LIMIT}); `truncated` tells when "
            "more matched.",
            properties={
                "sql": {"type": "string", "minLength": 1, "maxLength": 100_000},
                "params": params,
                "limit": {"type": "integer", "minimum": 1, "maximum": HARD_LIMIT},
            },
            required=["sql"],
            sensitive=False,
        ),
        tool(
            f"{prefix}.execute",
            f"Run one data-modifying statement (INSERT, UPDATE, DELETE, DDL) on the {engine} database and "
            f"commit it; placeholders are {placeholder}. Chaining statements is refused. Needs approval.",
            properties={"sql": {"type": "string", "minLength": 1, "maxLength": 100_000}, "params": params},
            required=["sql"],
            sensitive=True,
        ),
    )


def jsonable_cell(value: Any) -> Any:
    """A database value as JSON: numbers and text as they are, the rest as strings."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, str):
        return value if len(value) <= MAX_CELL_CHARS else value[:MAX_CELL_CHARS] + "…"
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return {"base64": base64.b64encode(bytes(value)[:MAX_CELL_CHARS]).decode()}
    if isinstance(value, list | tuple):
        return [jsonable_cell(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable_cell(v) for k, v in value.items()}
    return str(value)


class BaseSqlConnector(BuiltinConnector):
    """The shared guard and caps; subclasses implement `_read`, `_write` and `_ping` for their driver."""

    dialect: ClassVar[Dialect]
    secrets = {"password": "the database user's password"}

    async def test_connection(self, *, env: Mapping[str, str] | None = None) -> TestResult:
        """Connects, then reports a role that is too strong (`privileges: ...`, naming the fix)."""
        try:
            await self._ping(env or self._env)
            problems = await self._privilege_problems(env or self._env)
        except BuiltinToolError as exc:
            return TestResult(ok=False, detail=f"{exc.category}: {exc.explanation}")
        if not self.config.get("read_only"):
            problems = [p for p in problems if not p.startswith("can write")]
        if problems:
            found = "; ".join(problems)
            return TestResult(
                ok=False, detail=f"{PRIVILEGES}: user {self.config['user']!r} {found}. {self.read_only_fix}"
            )
        return TestResult(
            ok=True, detail="connected and ran SELECT 1", discovered_tools=[t.name for t in self.tools]
        )

    read_only_fix: ClassVar[str] = ""

    async def _privilege_problems(self, env: Mapping[str, str]) -> list[str]:
        """What the role may do that a query connector must not: superuser, file access, writes."""
        raise NotImplementedError

    async def _call(self, tool: str, arguments: dict[str, Any], env: Mapping[str, str]) -> Any:
        sql: str = arguments["sql"]
        params: Sequence[Any] = arguments.get("params") or []
        if tool.endswith(".query"):
            try:
                check_read(sql, self.dialect)
            except SqlRefused as exc:
                raise BuiltinToolError(
                    QUERY_REFUSED, f"refused before it reached the database: {exc}"
                ) from None
            limit = min(int(arguments.get("limit") or self.config["default_limit"]), HARD_LIMIT)
            columns, rows, budget_hit = await self._read(sql, params, limit=limit + 1, env=env)
            truncated = len(rows) > limit or budget_hit
            rows = rows[:limit]
            return {
                "columns": columns,
                "rows": [[jsonable_cell(v) for v in row] for row in rows],
                "row_count": len(rows),
                "truncated": truncated,
            }
        if self.config.get("read_only"):
            raise BuiltinToolError(
                QUERY_REFUSED, "this connector is read_only: execute is refused (use query to read)"
            )
        try:
            check_single(sql, self.dialect)
        except SqlRefused as exc:
            raise BuiltinToolError(QUERY_REFUSED, f"refused before it reached the database: {exc}") from None
        return await self._write(sql, params, env=env)

    async def _read(
        self, sql: str, params: Sequence[Any], *, limit: int, env: Mapping[str, str]
    ) -> tuple[list[str], list[Sequence[Any]], bool]:
        """Columns, at most `limit` rows, and whether the byte budget cut the result."""
        raise NotImplementedError

    async def _write(self, sql: str, params: Sequence[Any], *, env: Mapping[str, str]) -> dict[str, Any]:
        raise NotImplementedError

    async def _ping(self, env: Mapping[str, str]) -> None:
        raise NotImplementedError

    @classmethod
    def egress(cls, config: Mapping[str, Any]) -> list[tuple[str, int]]:
        port = config.get("port") or cls.config_schema["properties"]["port"]["default"]
        return [(str(config.get("host", "")), int(port))]
