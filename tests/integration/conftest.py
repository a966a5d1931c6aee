"""Fixtures shared by the integration tier: one FerretDB and one PostgreSQL for the whole session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.ferretdb import FerretDBUnavailable, running_ferretdb
from tests.integration.postgres import RunningPostgres, running_postgres
from tests.peers.servers import PeerUnavailable


@pytest.fixture(scope="session")
def ferretdb_uri() -> Iterator[str]:
    """A FerretDB (SQLite backend) on 127.0.0.1 for the whole session; fails, never skips, without go.

    Tests keep apart by database name (one per test), so every store suite shares this one server.
    """
    try:
        with running_ferretdb() as uri:
            yield uri
    except FerretDBUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def oe_postgres() -> Iterator[RunningPostgres]:
    """A PostgreSQL (Debian's package) on 127.0.0.1 for the whole session; tests take a database each."""
    try:
        with running_postgres() as server:
            yield server
    except PeerUnavailable as exc:
        pytest.fail(f"{exc} (make test runs it)", pytrace=False)


@pytest.fixture(scope="session")
def ferretdb_pg_uri(oe_postgres: RunningPostgres) -> Iterator[str]:
    """A FerretDB on its PostgreSQL backend (the session's PostgreSQL, a database of its own)."""
    try:
        with running_ferretdb(postgresql_url=oe_postgres.new_database()) as uri:
            yield uri
    except FerretDBUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
