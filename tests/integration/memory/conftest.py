"""Memory store fixtures: each backend behind one `backend` fixture, FerretDB started once per session."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from agent_runtime.memory.store.base import MemoryStore
from agent_runtime.memory.store.mongo import MongoStore
from agent_runtime.memory.store.sqlite import SqliteStore
from tests.integration.stores import Backend


@pytest.fixture(params=["sqlite", "mongodb"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend[MemoryStore]:
    if request.param == "sqlite":
        path = tmp_path / "state" / "memory.db"  # a parent directory the store must create
        return Backend("sqlite", lambda: SqliteStore(path))
    uri = request.getfixturevalue("ferretdb_uri")
    database = f"memory_{uuid.uuid4().hex[:16]}"
    return Backend("mongodb", lambda: MongoStore(uri, database))
