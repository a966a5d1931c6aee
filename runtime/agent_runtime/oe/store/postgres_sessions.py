"""`PostgresStore`'s console sessions (mixed into it): one row per signed-in browser, shared by replicas."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_runtime.oe.store.console_sessions import StoredSession

if TYPE_CHECKING:
    import asyncpg

SESSION_MIGRATION = """
    CREATE TABLE console_sessions (
        key TEXT PRIMARY KEY,
        expires_at DOUBLE PRECISION NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);
"""

_PUT = (
    "INSERT INTO console_sessions (key, expires_at, record) VALUES ($1, $2, $3) "
    "ON CONFLICT (key) DO UPDATE SET expires_at = EXCLUDED.expires_at, record = EXCLUDED.record"
)
_GET = "SELECT record FROM console_sessions WHERE key = $1 AND expires_at > $2"
_DROP = "DELETE FROM console_sessions WHERE key = $1"
_PRUNE = (
    "DELETE FROM console_sessions WHERE key IN "
    "(SELECT key FROM console_sessions WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2)"
)


class PostgresSessions:
    """Console sessions (`console_sessions`)."""

    if TYPE_CHECKING:

        async def _execute(self, sql: str, *args: Any) -> str: ...

        async def _fetchval(self, sql: str, *args: Any) -> Any: ...

        async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]: ...

    async def put_console_session(self, record: StoredSession) -> None:
        await self._execute(_PUT, record.key, float(record.expires_at), record.model_dump_json())

    async def get_console_session(self, key: str, *, now: float) -> StoredSession | None:
        text = await self._fetchval(_GET, key, float(now))
        return None if text is None else StoredSession.model_validate_json(text)

    async def drop_console_session(self, key: str) -> None:
        await self._execute(_DROP, key)

    async def prune_console_sessions(self, *, now: float, limit: int = 500) -> int:
        done = await self._execute(_PRUNE, float(now), int(limit))
        return int(done.rsplit(" ", 1)[-1]) if done.rsplit(" ", 1)[-1].isdigit() else 0
