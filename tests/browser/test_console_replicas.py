"""Console sessions shared by OE replicas (issue 30 with issue 35): two OE processes on one PostgreSQL store;
a browser signed in on one is signed in on the other, and signing out on either ends it on both."""

from __future__ import annotations

import os
import threading
import time
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


def _signed_in_cookie(base: str) -> str:
    """A session made over plain HTTP as the sign-in page's script makes it (its one-time value, JSON)."""
    form = httpx.get(f"{base}/console/sign-in")
    login = form.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
    answer = httpx.post(
        f"{base}/console/sign-in",
        json={"token": CLIENT_TOKEN, "login_csrf": login},
        headers={"cookie": f"ae_console_login={login}", "origin": base},
    )
    assert answer.status_code == 200, answer.text
    made = next(
        v for k, v in answer.headers.multi_items() if k == "set-cookie" and v.startswith("ae_console=")
    )
    return made.split(";", 1)[0].split("=", 1)[1]


def test_while_the_store_is_away_a_session_lookup_is_a_503_and_the_session_survives(
    replicas: Replicas, postgres: RunningPostgres
) -> None:
    one, two = replicas.urls
    cookie = _signed_in_cookie(one)
    assert _me(two, cookie) == 200
    postgres.stop()
    try:
        away = httpx.get(f"{two}/console/data/me", headers={"cookie": f"ae_console={cookie}"}, timeout=30)
        assert away.status_code == 503, away.text
        assert away.headers["retry-after"] and "store" in away.json()["message"]
        assert "Traceback" not in away.text and "postgresql://" not in away.text
    finally:
        # Its own thread: Playwright's event loop may hold this one (the module's browser fixture).
        restart = threading.Thread(target=postgres.start)
        restart.start()
        restart.join(timeout=60)
    deadline = time.monotonic() + 30
    while _me(two, cookie) != 200:
        assert time.monotonic() < deadline, "the session did not come back with the store"
        time.sleep(0.5)
    for process in replicas.processes:  # the token and the cookie reach no log, outage or not
        assert CLIENT_TOKEN not in process.output() and cookie not in process.output()
