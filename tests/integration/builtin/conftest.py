"""Real peers for the built-in connectors, one of each per test session: PostgreSQL and MariaDB (Debian's
packages), Dovecot IMAP (Debian's package), aiosmtpd SMTP, and the loopback SaaS peer."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from tests.peers.servers import (
    MailServer,
    PeerUnavailable,
    SmtpServer,
    SqlServer,
    dovecot_server,
    mariadb_server,
    postgres_server,
    smtp_server,
)
from tests.providers.saas_peer import SaasPeer, running_saas_peer

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def _start(factory: Any) -> Iterator[Any]:
    try:
        manager = factory()
        server = manager.__enter__()
    except PeerUnavailable as exc:
        pytest.fail(f"{exc} (make test runs it)")
    try:
        yield server
    finally:
        manager.__exit__(None, None, None)


@pytest.fixture(scope="session")
def postgres() -> Iterator[SqlServer]:
    yield from _start(postgres_server)


@pytest.fixture(scope="session")
def mariadb() -> Iterator[SqlServer]:
    yield from _start(mariadb_server)


@pytest.fixture(scope="session")
def imap() -> Iterator[MailServer]:
    yield from _start(dovecot_server)


@pytest.fixture()
def smtp() -> Iterator[SmtpServer]:
    with smtp_server() as server:
        yield server


@pytest.fixture(scope="module")
def saas() -> Iterator[SaasPeer]:
    with running_saas_peer() as peer:
        yield peer
