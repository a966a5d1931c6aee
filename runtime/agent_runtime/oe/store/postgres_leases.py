"""`PostgresStore`'s leases (oe/leases.py): an insert under the key, or a compare-and-set on `version`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_runtime.oe.store.leases import LeaseRecord

if TYPE_CHECKING:
    import asyncpg

_GET_LEASE = "SELECT key, holder, expires_at, version FROM leases WHERE key = $1"
_CREATE_LEASE = (
    "INSERT INTO leases (key, holder, expires_at, version) VALUES ($1, $2, $3, 1) "
    "ON CONFLICT (key) DO NOTHING"
)
_REPLACE_LEASE = (
    "UPDATE leases SET holder = $2, expires_at = $3, version = version + 1 WHERE key = $1 AND version = $4"
)


class PostgresLeases:
    if TYPE_CHECKING:

        async def _execute(self, sql: str, *args: Any) -> str: ...

        async def _fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None: ...

    async def get_lease(self, key: str) -> LeaseRecord | None:
        row = await self._fetchrow(_GET_LEASE, key)
        if row is None:
            return None
        return LeaseRecord(key=row[0], holder=row[1], expires_at=row[2], version=row[3])

    async def put_lease(self, record: LeaseRecord, *, create: bool) -> bool:
        if create:
            done = await self._execute(_CREATE_LEASE, record.key, record.holder, record.expires_at)
        else:
            done = await self._execute(
                _REPLACE_LEASE, record.key, record.holder, record.expires_at, record.version
            )
        return done.endswith(" 1")
