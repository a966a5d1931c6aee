"""The crash campaign on three OE replicas over PostgreSQL (issue 35), asserted rather than reported:

- at every kill point the replica doing the run's work is SIGKILLed and started again;
- two conflicting resumes race, each on a different replica, 100 times (`RESUME_RACES`, in `make test` as
  in `make crash`), and a cancel races a resume (`RACES` times: 10 in `make test`, 100 in `make crash`): no
  cancel answered 200 is lost, no decision is taken twice;
- the AER's replica is cut off PostgreSQL mid-run (reset connections, then lost packets) and healed, and
  PostgreSQL itself is SIGKILLed and restarted mid-run: every execution completes, no side effect runs
  twice, and a client asking the cut-off replica meanwhile gets 503 with Retry-After, never a 500.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.crash.campaign import (
    EXTRA_FIGURES,
    POINTS,
    TENANT,
    Spawner,
    cancel_race_trial,
    double_resume_trial,
    mechanism_figures,
    run_point,
    show_outputs,
)
from tests.crash.conftest import NO_MODEL
from tests.crash.postgres_platform import RACES, RESUME_RACES, PostgresReplicas
from tests.integration.postgres import OE_PASSWORD, RunningPostgres, running_postgres
from tests.peers.servers import PeerUnavailable
from tests.providers.ledger_provider import RunningLedger

BATCH = 10


@pytest.fixture(scope="module")
def postgres() -> Iterator[RunningPostgres]:
    try:
        with running_postgres() as server:
            yield server
    except PeerUnavailable as exc:
        pytest.fail(f"{exc} (make test runs it)", pytrace=False)


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory,
    spawner: Spawner,
    provider: RunningLedger,
    postgres: RunningPostgres,
) -> Iterator[PostgresReplicas]:
    dsn = postgres.new_database()
    replicas = PostgresReplicas(
        tmp=tmp_path_factory.mktemp("crash-postgres"),
        spawn=spawner,
        llm_base_url=NO_MODEL,
        provider_url=provider.url,
        tenant=TENANT,
        postgres=postgres,
        dsn_database=dsn.rsplit("/", 1)[1],
    )
    try:
        yield replicas.start()
        EXTRA_FIGURES.append(mechanism_figures(spawner, "postgres-3-replicas"))
        answers = replicas.outage_answers
        EXTRA_FIGURES.append(f"postgres-3-replicas: answers while the store was away: {answers}")
    finally:
        for proc in replicas.processes.values():
            proc.stop(timeout=5)
        replicas.stop()


def _completed_once(platform: PostgresReplicas, provider: RunningLedger, *, target: str, point: str) -> None:
    report = run_point(platform, provider, target=target, point=point)
    assert report.error is None, f"{report.error}\n{show_outputs(platform)}"
    assert report.duplicates == 0, report
    assert report.status == "completed", f"{report}\n{show_outputs(platform)}"
    assert (report.missing, report.told_failed) == ([], []), report


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_of_the_working_replica_at_every_point_runs_each_side_effect_once(
    platform: PostgresReplicas, provider: RunningLedger, point: str
) -> None:
    _completed_once(platform, provider, target="oe", point=point)


def _in_batches(trial: Callable[..., dict[str, int]], *args: object, races: int) -> dict[str, int]:
    """`races` trials, `BATCH` suspended executions at a time (100 at once would only measure the queue)."""
    total: dict[str, int] = {}
    for start in range(0, races, BATCH):
        for name, value in trial(*args, trials=min(BATCH, races - start)).items():
            total[name] = total.get(name, 0) + value
    return total


# A batch of ten takes about a minute on a busy 2-core machine.
@pytest.mark.timeout(300 + 12 * RESUME_RACES)
def test_conflicting_resumes_on_two_replicas_one_wins_every_time(
    platform: PostgresReplicas, provider: RunningLedger
) -> None:
    figures = _in_batches(double_resume_trial, platform, provider, races=RESUME_RACES)
    assert figures["trials"] == RESUME_RACES, figures
    EXTRA_FIGURES.append(f"postgres-3-replicas: two conflicting resumes, one per replica, at once: {figures}")
    assert figures["both_accepted"] == 0 and figures["duplicates"] == 0, figures
    assert figures["charged_twice"] == 0 and figures["not_completed"] == 0, figures


@pytest.mark.timeout(300 + 12 * RACES)
def test_a_cancel_racing_a_resume_on_two_replicas_is_never_lost(
    platform: PostgresReplicas, provider: RunningLedger
) -> None:
    """PostgreSQL's compare-and-set is atomic across replicas: a cancel answered 200 leaves the execution
    cancelled whatever the resume on the other replica did (asserted, where FerretDB v1 only reports)."""
    figures = _in_batches(cancel_race_trial, platform, provider, races=RACES)
    EXTRA_FIGURES.append(f"postgres-3-replicas: a cancel and a resume at once, one per replica: {figures}")
    assert figures["lost_cancels"] == 0 and figures["charged_twice"] == 0, figures


@pytest.mark.parametrize("mode", ["drop", "blackhole"])
@pytest.mark.parametrize("point", ["b2", "m3", "b5"])
def test_the_working_replica_cut_off_postgres_then_healed_completes_once(
    platform: PostgresReplicas, provider: RunningLedger, mode: str, point: str
) -> None:
    before = len(platform.outage_answers)
    _completed_once(platform, provider, target=f"partition:{mode}", point=point)
    (what, status, retry_after) = platform.outage_answers[before]
    assert (what, status) == (f"partition:{mode}", 503), platform.outage_answers
    assert retry_after is not None and int(retry_after) > 0


@pytest.mark.parametrize("point", ["b3", "m4"])
def test_postgres_killed_and_restarted_mid_run_completes_once(
    platform: PostgresReplicas, provider: RunningLedger, point: str
) -> None:
    before = len(platform.outage_answers)
    _completed_once(platform, provider, target="postgres", point=point)
    (_, status, retry_after) = platform.outage_answers[before]
    assert status == 503 and retry_after is not None, platform.outage_answers


def test_no_process_log_holds_the_database_password(platform: PostgresReplicas) -> None:
    assert platform.postgres is not None
    logs = show_outputs(platform, limit=10**7)
    assert OE_PASSWORD not in logs
    assert OE_PASSWORD not in platform.postgres.log_tail()


@pytest.mark.parametrize("point", ["b2", "b5"])
def test_a_lost_aer_run_is_restarted_by_one_replica_only(
    platform: PostgresReplicas, provider: RunningLedger, point: str
) -> None:
    """Three watchdogs see the run the killed AER lost; the lease gives it to one, which restarts it once."""
    report = run_point(platform, provider, target="aer", point=point)
    assert report.error is None, f"{report.error}\n{show_outputs(platform)}"
    assert (report.status, report.duplicates) == ("completed", 0), f"{report}\n{show_outputs(platform)}"
    with platform.client() as client:
        audit = client.get(f"/execution/{report.execution_id}/audit").json()
    records = audit.get("records", audit.get("items", [])) if isinstance(audit, dict) else audit
    restarts = [record for record in records if record["kind"] == "restart"]
    assert len(restarts) == 1, restarts
