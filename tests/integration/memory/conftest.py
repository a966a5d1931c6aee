"""Memory store fixtures: each backend behind one `backend` fixture, FerretDB started once per session."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from agent_runtime.memory.store.base import MemoryStore
from agent_runtime.memory.store.mongo import MongoStore
from agent_runtime.memory.store.sqlite import SqliteStore
from tests.integration.ferretdb import FerretDBUnavailable, running_ferretdb

T = TypeVar("T")


@pytest.fixture(scope="session")
def memory_ferretdb_uri() -> Iterator[str]:
    """A FerretDB (SQLite backend) on 127.0.0.1 for the whole session; fails, never skips, without go."""
    try:
        with running_ferretdb() as uri:
            yield uri
    except FerretDBUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@dataclass
class Backend:
    """One backend's data: `make()` opens a new store on it (as another server process would)."""

    name: str
    make: Callable[[], MemoryStore]

    def run(self, scenario: Callable[[MemoryStore], Awaitable[T]]) -> T:
        """Run `scenario` on an open store in a fresh event loop; the store is closed afterwards."""

        async def main() -> T:
            store = self.make()
            await store.open()
            try:
                return await scenario(store)
            finally:
                await store.close()

        return asyncio.run(main())


@pytest.fixture(params=["sqlite", "mongodb"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        path = tmp_path / "state" / "memory.db"  # a parent directory the store must create
        return Backend("sqlite", lambda: SqliteStore(path))
    uri = request.getfixturevalue("memory_ferretdb_uri")
    database = f"memory_{uuid.uuid4().hex[:16]}"
    return Backend("mongodb", lambda: MongoStore(uri, database))
