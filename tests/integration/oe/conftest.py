"""Store fixtures: every backend behind one `backend` fixture, FerretDB started once per session."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from agent_runtime.oe.store import MongoStore, SqliteStore, Store
from tests.integration.ferretdb import FerretDBUnavailable, running_ferretdb

T = TypeVar("T")


@pytest.fixture(scope="session")
def ferretdb_uri() -> Iterator[str]:
    """A FerretDB (SQLite backend) on 127.0.0.1 for the whole session; fails, never skips, without go."""
    try:
        with running_ferretdb() as uri:
            yield uri
    except FerretDBUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@dataclass
class Backend:
    """One backend's data: `make()` is a new store on it (as another OE replica would open it)."""

    name: str
    make: Callable[[], Store]

    def run(self, scenario: Callable[[Store], Awaitable[T]]) -> T:
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
        path = tmp_path / "state" / "oe.db"  # a parent directory the store must create
        return Backend("sqlite", lambda: SqliteStore(path))
    uri = request.getfixturevalue("ferretdb_uri")
    database = f"oe_{uuid.uuid4().hex}"
    return Backend("mongodb", lambda: MongoStore(uri, database))
