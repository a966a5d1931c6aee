"""Store fixtures: every backend behind one `backend` fixture, FerretDB and PostgreSQL started once per
session."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from agent_runtime.oe.store import MongoStore, PostgresStore, SqliteStore, Store
from tests.integration.stores import Backend


@pytest.fixture(params=["sqlite", "mongodb", "mongodb-on-postgres", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend[Store]:
    if request.param == "sqlite":
        path = tmp_path / "state" / "oe.db"  # a parent directory the store must create
        return Backend("sqlite", lambda: SqliteStore(path))
    if request.param == "postgres":
        dsn = request.getfixturevalue("oe_postgres").new_database()
        return Backend("postgres", lambda: PostgresStore(dsn))
    uri = request.getfixturevalue("ferretdb_pg_uri" if request.param.endswith("postgres") else "ferretdb_uri")
    database = f"oe_{uuid.uuid4().hex}"
    return Backend(request.param, lambda: MongoStore(uri, database))
