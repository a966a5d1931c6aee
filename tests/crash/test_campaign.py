"""The crash campaign on the embedded store: one OE (SQLite), its AER and Tool Pod; each of the three is
SIGKILLed at every kill point of a six-step execution with an approval in the middle."""

from __future__ import annotations

import pytest

from tests.crash.campaign import (
    EFFECTS,
    EXTRA_FIGURES,
    POINTS,
    CrashPlatform,
    cancel_race_trial,
    double_resume_trial,
    run_point,
    show_outputs,
)
from tests.providers.ledger_provider import RunningLedger


def test_without_a_crash_every_effect_happens_once(
    sqlite_platform: CrashPlatform, provider: RunningLedger
) -> None:
    report = run_point(sqlite_platform, provider, target="none", point="none")
    assert (report.status, report.duplicates, report.missing, report.told_failed) == ("completed", 0, [], [])
    assert report.runs == 2  # the run that suspended, and the resumed one


@pytest.mark.parametrize("target", ["oe", "aer", "tool"])
@pytest.mark.parametrize("point", POINTS)
def test_sigkill_at_every_point_runs_each_side_effect_at_most_once_and_completes(
    sqlite_platform: CrashPlatform, provider: RunningLedger, target: str, point: str
) -> None:
    report = run_point(sqlite_platform, provider, target=target, point=point)
    assert report.error is None, f"{report.error}\n{show_outputs(sqlite_platform)}"
    assert report.duplicates == 0, report
    assert report.status == "completed", f"{report}\n{show_outputs(sqlite_platform)}"
    # The agent is told a step failed only where its runner died while it ran, so that the platform cannot
    # know whether it took effect (and does not run it again); every other side effect happened, once.
    told = {entry.split(":")[0] for entry in report.told_failed}
    assert set(report.missing) <= told, report
    if target == "tool" and (point.startswith("m") or point == "resumed"):
        # A call sent while the Tool Pod dies (the next step, or the approved call right after a resume) is
        # lost with it, in the socket, and is told failed too: never run, never reported as done.
        assert set(told_failed(target, point)) <= set(report.told_failed), report
        assert all(entry.endswith(":tool_pod_unreachable") for entry in report.told_failed), report
    else:
        assert report.told_failed == told_failed(target, point), report


def told_failed(target: str, point: str) -> list[str]:
    """The steps whose outcome is unknowable at this kill point: a Tool Pod killed while its call ran
    (`tool_pod_unreachable`), an AER killed while its local tool ran (`outcome_unknown`)."""
    step = int(point[1:]) if point.startswith("m") else None
    if step is not None and target == "tool" and step != 3:
        return [f"{EFFECTS[step]}:tool_pod_unreachable"]
    if step == 3 and target == "aer":
        return ["note:outcome_unknown"]
    return []


def test_two_resumes_at_once_one_wins_and_a_cancel_racing_a_resume_is_never_lost(
    sqlite_platform: CrashPlatform, provider: RunningLedger
) -> None:
    figures = double_resume_trial(sqlite_platform, provider, trials=5)
    EXTRA_FIGURES.append(f"sqlite: two conflicting resumes sent at once: {figures}")
    assert figures["both_accepted"] == 0 and figures["duplicates"] == 0, figures
    race = cancel_race_trial(sqlite_platform, provider, trials=5)
    EXTRA_FIGURES.append(f"sqlite: a cancel and a resume sent at once: {race}")
    assert race == {"trials": 5, "lost_cancels": 0, "charged_twice": 0}, race
