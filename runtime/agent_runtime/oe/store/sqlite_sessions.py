"""`SqliteStore`'s console sessions (mixed into it; runs on its worker thread)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agent_runtime.oe.store.console_sessions import StoredSession

T = TypeVar("T")

SESSION_SCHEMA = """
CREATE TABLE IF NOT EXISTS console_sessions (
    key TEXT PRIMARY KEY,
    expires_at REAL NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS console_sessions_by_expiry ON console_sessions (expires_at);
"""

_PUT = (
    "INSERT INTO console_sessions (key, expires_at, record) VALUES (?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at, record = excluded.record"
)
_GET = "SELECT record FROM console_sessions WHERE key = ? AND expires_at > ?"
_DROP = "DELETE FROM console_sessions WHERE key = ?"
_PRUNE = (
    "DELETE FROM console_sessions WHERE key IN "
    "(SELECT key FROM console_sessions WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)"
)


class SqliteSessions:
    """Console sessions (`console_sessions`) in the store's file."""

    if TYPE_CHECKING:

        async def _run(self, fn: Callable[..., T], *args: Any) -> T: ...

        def _execute(self, sql: str, params: tuple[Any, ...]) -> int: ...

        def _fetchone(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None: ...

    async def put_console_session(self, record: StoredSession) -> None:
        await self._run(self._execute, _PUT, (record.key, record.expires_at, record.model_dump_json()))

    async def get_console_session(self, key: str, *, now: float) -> StoredSession | None:
        row = await self._run(self._fetchone, _GET, (key, float(now)))
        return None if row is None else StoredSession.model_validate_json(row[0])

    async def drop_console_session(self, key: str) -> None:
        await self._run(self._execute, _DROP, (key,))

    async def prune_console_sessions(self, *, now: float, limit: int = 500) -> int:
        return await self._run(self._execute, _PRUNE, (float(now), int(limit)))
