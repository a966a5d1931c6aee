"""`PostgresStore.atomic()`: the calls one task makes inside it are one transaction (mixed into the store).

The task's connection, in a transaction, is kept in a context variable with the task that owns it, so
every store call of that task inside the block (`_call`) runs on it, and a task started meanwhile (which
copies the context) does not: it takes its own connection from the pool. An exception leaving the block
rolls everything back; nested blocks join the outer transaction. The transaction's first statement locks
nothing the block does not touch, so two steps of different executions never wait on each other.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import asyncpg

from agent_runtime.oe.store.outage import Outage
from agent_runtime.oe.store.unavailable import StoreUnavailable

# How long one call waits for a connection (pool exhausted, or the server gone) before it is unavailable.
ACQUIRE_TIMEOUT_S = 10.0
# What a lost, restarting or unreachable server looks like to asyncpg.
UNAVAILABLE = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.InterfaceError,
    asyncpg.AdminShutdownError,
    asyncpg.QueryCanceledError,  # statement_timeout: the server is too slow to answer
)

Held = tuple["asyncio.Task[Any]", asyncpg.Connection]


class PostgresTransactions:
    if TYPE_CHECKING:
        _pool: asyncpg.Pool | None
        _tx: ContextVar[Held | None]
        outage: Outage

    def _held(self) -> asyncpg.Connection | None:
        """The connection of the transaction the current task is in, if any."""
        held = self._tx.get()
        if held is None or held[0] is not asyncio.current_task():
            return None
        return held[1]

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        self.outage.lost(type(exc).__name__)
        return StoreUnavailable(f"PostgreSQL is unavailable ({type(exc).__name__})")

    @contextlib.asynccontextmanager
    async def atomic(self) -> AsyncIterator[None]:
        if self._held() is not None:
            yield  # joins the transaction around it
            return
        if self._pool is None:
            raise RuntimeError("PostgresStore is not open: await store.open() first")
        task = asyncio.current_task()
        assert task is not None
        problem: BaseException | None = None
        try:
            conn = await self._pool.acquire(timeout=ACQUIRE_TIMEOUT_S)
        except UNAVAILABLE as exc:
            problem = exc
        if problem is not None:
            raise self._unavailable(problem)  # outside the except block: no message quoting the host
        try:
            transaction = conn.transaction()
            try:
                await transaction.start()
            except UNAVAILABLE as exc:
                problem = exc
            if problem is not None:
                raise self._unavailable(problem)
            token = self._tx.set((task, conn))
            try:
                yield
            except BaseException:
                self._tx.reset(token)
                with contextlib.suppress(Exception):
                    await transaction.rollback()
                raise
            self._tx.reset(token)
            try:
                await transaction.commit()
            except UNAVAILABLE as exc:
                problem = exc  # committed or not, the caller cannot tell: every OE write is safe to repeat
            if problem is not None:
                raise self._unavailable(problem)
        finally:
            await self._pool.release(conn)
