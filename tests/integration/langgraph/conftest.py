"""LangGraph fixtures: one FerretDB for the session (the MongoDB wire protocol, over SQLite)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.ferretdb import FerretDBUnavailable, running_ferretdb


@pytest.fixture(scope="session")
def ferretdb_uri() -> Iterator[str]:
    """A FerretDB on 127.0.0.1 for the whole session; fails, never skips, without go."""
    try:
        with running_ferretdb() as uri:
            yield uri
    except FerretDBUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
