"""The crash campaign with two OE replicas on the MongoDB store (FerretDB v1): at every kill point the
replica doing the run's work is SIGKILLed and started again while the other one carries on."""

from __future__ import annotations

import pytest

from tests.crash.campaign import (
    EXTRA_FIGURES,
    POINTS,
    ReplicatedPlatform,
    cancel_race_trial,
    double_resume_trial,
    run_point,
    show_outputs,
)
from tests.providers.ledger_provider import RunningLedger


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_of_one_replica_at_every_point_runs_each_side_effect_at_most_once_and_completes(
    replicated_platform: ReplicatedPlatform, provider: RunningLedger, point: str
) -> None:
    report = run_point(replicated_platform, provider, target="oe", point=point)
    assert report.error is None, f"{report.error}\n{show_outputs(replicated_platform)}"
    assert report.duplicates == 0, report
    assert report.status == "completed", f"{report}\n{show_outputs(replicated_platform)}"
    assert (report.missing, report.told_failed) == ([], []), report


def test_two_conflicting_resumes_on_two_replicas_one_wins(
    replicated_platform: ReplicatedPlatform, provider: RunningLedger
) -> None:
    """FerretDB v1 applies an update as a read and a whole-document write, so a status compare-and-set is
    not atomic across two replicas; the decision is therefore claimed under a unique key first, which is."""
    figures = double_resume_trial(replicated_platform, provider, trials=10)
    EXTRA_FIGURES.append(f"mongodb-2-replicas: two conflicting resumes, one per replica, at once: {figures}")
    assert figures["both_accepted"] == 0 and figures["duplicates"] == 0, figures
    assert figures["not_completed"] == 0, figures


def test_a_cancel_racing_a_resume_on_two_replicas_is_measured(
    replicated_platform: ReplicatedPlatform, provider: RunningLedger
) -> None:
    """Both rewrite the execution's document, which FerretDB v1 does not do atomically across replicas:
    the later whole-document write wins. Without the decision claim, 2 of 10 cancels answered 200 were lost
    under the resume; with it (and with the resume counting its run in its own write), 0 of 10 in each run
    so far. It cannot be ruled out there: a write the resumed run makes on the other replica at the very
    moment of the cancel can still put the status back. So the count is reported; the side effect must
    still run at most once."""
    figures = cancel_race_trial(replicated_platform, provider, trials=10)
    EXTRA_FIGURES.append(f"mongodb-2-replicas: a cancel and a resume at once, one per replica: {figures}")
    assert figures["charged_twice"] == 0, figures
