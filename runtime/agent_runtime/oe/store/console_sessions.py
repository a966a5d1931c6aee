"""Console sessions as the store keeps them, so every OE replica sharing a store knows each one (issue 30).

A row is keyed by the SHA-256 of the cookie's random id (the store never holds a usable cookie value) and
holds the bearer token sealed under a key derived from that id: a dump of the store opens no session and
reveals no token. Rows past `expires_at` are never answered and are pruned as sessions are made.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field


class StoredSession(BaseModel):
    """One signed-in browser, as stored: nothing here is usable without the cookie."""

    key: str = Field(pattern=r"^[0-9a-f]{64}$")  # hex SHA-256 of the cookie's id
    sealed: str  # the bearer token, AES-GCM under a key derived from the cookie's id (console/sessions.py)
    username: str
    expires_at: float  # epoch seconds


@runtime_checkable
class ConsoleSessionRows(Protocol):
    """What a store offers the console's sessions (the SQLite, PostgreSQL and MongoDB stores all do)."""

    async def put_console_session(self, record: StoredSession) -> None: ...

    async def get_console_session(self, key: str, *, now: float) -> StoredSession | None:
        """The row for `key` while `now` is before its expiry, else None."""
        ...

    async def drop_console_session(self, key: str) -> None: ...

    async def prune_console_sessions(self, *, now: float, limit: int = 500) -> int:
        """Delete up to `limit` expired rows; how many went."""
        ...
