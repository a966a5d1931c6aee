"""Console sessions in every store backend (issue 30): a row written by one store object (one replica) is
read by another on the same database, only until it expires, and is gone for both once dropped."""

from __future__ import annotations

from agent_runtime.console.sessions import SessionStore
from agent_runtime.oe.store import Store
from agent_runtime.oe.store.console_sessions import ConsoleSessionRows, StoredSession
from tests.integration.stores import Backend


def _row(key: str, expires_at: float) -> StoredSession:
    return StoredSession(key=key, sealed="c2VhbGVk", username="alice", expires_at=expires_at)


def test_console_session_rows_are_shared_expire_and_drop(backend: Backend[Store]) -> None:
    async def scenario(store: Store) -> None:
        assert isinstance(store, ConsoleSessionRows)
        other = backend.make()
        await other.open()
        try:
            assert isinstance(other, ConsoleSessionRows)
            await store.put_console_session(_row("a" * 64, 100.0))
            await store.put_console_session(_row("b" * 64, 200.0))
            assert await other.get_console_session("a" * 64, now=99.0) == _row("a" * 64, 100.0)
            assert await other.get_console_session("a" * 64, now=100.0) is None  # expired: never answered
            assert await other.get_console_session("c" * 64, now=0.0) is None
            assert await other.prune_console_sessions(now=150.0) == 1  # a's row, not b's
            assert await store.get_console_session("b" * 64, now=150.0) is not None
            await other.drop_console_session("b" * 64)
            assert await store.get_console_session("b" * 64, now=150.0) is None

            # The console's own layer on two replicas: signed in on one, known to the other, out on both.
            first, second = SessionStore(store), SessionStore(other)
            session_id, made = await first.create(token="bearer-of-alice", username="alice")
            assert await second.get(session_id) == made
            await second.drop(session_id)
            assert await first.get(session_id) is None
        finally:
            await other.close()

    backend.run(scenario)
