"""The OE while its PostgreSQL is gone (issue 35): a real OE process reaching a real PostgreSQL through a
loopback TCP proxy the test controls, then the server itself stopped and started again.

While the store is away `/readyz` answers 503 naming the reason (never the password) and `/healthz` stays
200, so Kubernetes takes the replica out of its Service without killing it; the background loops
(watchdog, drains, approvals gauge, the store watch) log one warning per outage and one line when the store
is back, never a traceback per tick.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO_ROOT, Process, free_port
from tests.crash.partition import PartitionProxy
from tests.integration.postgres import OE_PASSWORD, RunningPostgres

CLIENT_TOKEN = "outage-client-token-7f3a9c"
LOST = "the store is unavailable: PostgreSQL did not answer"
BACK = "the store is back: PostgreSQL answers again"
# How long each outage lasts once /readyz said so: many watchdog ticks (every 0.2 s) and store watches.
OUTAGE_S = 6.0


@pytest.fixture
def proxy(oe_postgres: RunningPostgres) -> Iterator[PartitionProxy]:
    partition = PartitionProxy(oe_postgres.port).start()
    yield partition
    partition.stop()


def _start_oe(
    spawn: Callable[..., Process], tmp_path: Path, *, dsn: str, port: int
) -> tuple[Process, httpx.Client]:
    (tmp_path / "registrations").mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(REPO_ROOT),
        "RUNNER_MODE": "oe",
        "APP_HOST": "127.0.0.1",
        "RUNTIME_PORT": str(port),
        "OE_REGISTRATIONS_DIR": str(tmp_path / "registrations"),
        "OE_CLIENT_TOKEN": CLIENT_TOKEN,
        "OE_STORE_TYPE": "postgres",
        "OE_POSTGRES_URL": dsn,
        "OE_POSTGRES_POOL_SIZE": "4",
        # A lost packet is noticed within 2 s (3 with the client's margin), not the default 10.
        "OE_POSTGRES_STATEMENT_TIMEOUT_S": "2",
        "OE_WATCHDOG_INTERVAL_S": "0.2",
    }
    proc = spawn([sys.executable, "-m", "agent_runtime.launcher"], env=env, name="oe")
    client = httpx.Client(
        base_url=f"http://127.0.0.1:{port}", headers={"authorization": f"Bearer {CLIENT_TOKEN}"}, timeout=30
    )
    _until(client, 200, proc=proc, within_s=60)
    return proc, client


def _until(client: httpx.Client, status: int, *, proc: Process, within_s: float) -> httpx.Response:
    """`/readyz` once it answers `status` (the probe's own timeout is Kubernetes' default, 1 s)."""
    deadline = time.monotonic() + within_s
    while True:
        assert proc.popen.poll() is None, f"the OE exited:\n{proc.output()}"
        try:
            response = client.get("/readyz", timeout=1.0)
            if response.status_code == status:
                return response
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"/readyz never answered {status}:\n{proc.output()[-5000:]}"
        time.sleep(0.2)


def _during_outage(client: httpx.Client, proc: Process) -> None:
    """Not ready with a reason and no secret, alive, and a client's read is a 503 with Retry-After."""
    ready = _until(client, 503, proc=proc, within_s=20)
    reason = ready.json()["reason"]
    assert reason.startswith("the store is unavailable: PostgreSQL did not answer"), reason
    assert OE_PASSWORD not in ready.text
    deadline = time.monotonic() + OUTAGE_S
    while time.monotonic() < deadline:
        assert client.get("/healthz", timeout=5).status_code == 200
        time.sleep(0.5)
    read = client.get("/executions")
    assert read.status_code == 503, read.text
    assert int(read.headers["retry-after"]) > 0
    assert OE_PASSWORD not in read.text


def test_readiness_and_one_log_line_each_way_per_store_outage(
    oe_postgres: RunningPostgres,
    proxy: PartitionProxy,
    spawn: Callable[..., Process],
    tmp_path: Path,
) -> None:
    dsn = oe_postgres.new_database().replace(f":{oe_postgres.port}/", f":{proxy.port}/")
    proc, client = _start_oe(spawn, tmp_path, dsn=dsn, port=free_port())
    try:
        assert client.get("/healthz").status_code == 200
        assert client.get("/executions").status_code == 200

        # 1. The OE cut off its store: packets lost both ways, nothing refused (the worst partition).
        proxy.cut("blackhole")
        _during_outage(client, proc)
        proxy.heal()
        _until(client, 200, proc=proc, within_s=20)
        assert client.get("/executions").status_code == 200

        # 2. PostgreSQL itself stopped (every session cut, new ones refused), then started again.
        oe_postgres.stop()
        try:
            _during_outage(client, proc)
        finally:
            oe_postgres.start()
        _until(client, 200, proc=proc, within_s=30)
        assert client.get("/executions").status_code == 200
    finally:
        client.close()

    log = proc.output()
    assert log.count(LOST) == 2, log
    assert log.count(BACK) == 2, log
    assert "Traceback" not in log and " ERROR " not in log, log
    assert OE_PASSWORD not in log
