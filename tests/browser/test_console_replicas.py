"""Console sessions shared by OE replicas (issue 30 with issue 35): two OE processes on one PostgreSQL store;
a browser signed in on one is signed in on the other, and signing out on either ends it on both."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Console
from tests.conftest import REPO_ROOT, Process, free_port
from tests.integration.loop.harness import CLIENT_TOKEN, Platform
from tests.integration.postgres import RunningPostgres, running_postgres
from tests.peers.servers import PeerUnavailable

pytestmark = pytest.mark.browser


@dataclass
class Replicas:
    urls: tuple[str, str]
    processes: tuple[Process, Process]


@pytest.fixture(scope="module")
def postgres() -> Iterator[RunningPostgres]:
    try:
        with running_postgres() as server:
            yield server
    except PeerUnavailable as exc:
        pytest.fail(f"{exc} (make test runs it)", pytrace=False)


@pytest.fixture(scope="module")
def replicas(platform: Platform, postgres: RunningPostgres) -> Replicas:
    """Two OEs (the launcher in OE mode) sharing one PostgreSQL database, the platform's AER and Tool Pod."""
    dsn = postgres.new_database()
    started: list[tuple[str, Process]] = []
    for _ in range(2):
        port = free_port()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(platform.tmp),
            "PYTHONPATH": str(REPO_ROOT),
            "RUNNER_MODE": "oe",
            "APP_HOST": "127.0.0.1",
            "RUNTIME_PORT": str(port),
            "STRUCTURED_LOGGING": "true",
            "OE_STORE_TYPE": "postgres",
            "OE_POSTGRES_URL": dsn,
            "OE_REPLICAS": "2",
            "OE_REGISTRATIONS_DIR": str(platform.tmp / "registrations"),
            "OE_CLIENT_TOKEN": CLIENT_TOKEN,
        }
        started.append((f"http://127.0.0.1:{port}", platform._launch(env, port=port)))
    (one, first), (two, second) = started
    return Replicas(urls=(one, two), processes=(first, second))


def _me(base: str, cookie: str) -> int:
    """What an OE answers a session's cookie (the browser's value, sent by hand)."""
    return httpx.get(f"{base}/console/data/me", headers={"cookie": f"ae_console={cookie}"}).status_code


def test_a_session_made_on_one_replica_works_on_the_other_and_sign_out_ends_it_on_both(
    replicas: Replicas, console_for: Callable[..., Console]
) -> None:
    # `replicas` first: PostgreSQL's setup runs its own event loop, before Playwright's holds the thread.
    one, two = replicas.urls
    signed = console_for(one)
    signed.sign_in(CLIENT_TOKEN)
    signed.page.wait_for_url("**/console/inbox")
    cookie = next(c["value"] for c in signed.context.cookies() if c["name"] == "ae_console")

    # The same browser on the other replica (cookies are per host, not per port): signed in there too.
    signed.page.goto(two + "/console/inbox")
    signed.page.wait_for_selector("#app[data-ready=true]", timeout=15_000)
    expect(signed.page.locator("#who")).to_have_text("agent-engine:static-token")
    assert _me(one, cookie) == 200 and _me(two, cookie) == 200

    # Signing out on the second replica ends the session the first one made, on both.
    signed.page.click("#sign-out button[type=submit]")
    signed.page.wait_for_url("**/console/sign-in")
    assert _me(one, cookie) == 401 and _me(two, cookie) == 401
    signed.page.goto(one + "/console/inbox")
    signed.page.wait_for_url("**/console/sign-in")
    for process in replicas.processes:
        assert CLIENT_TOKEN not in process.output() and cookie not in process.output()
