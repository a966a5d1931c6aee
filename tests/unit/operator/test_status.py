"""Status logic: conditions from the outcome and Deployment states; no churn when nothing changed."""

from __future__ import annotations

import dataclasses

from agent_operator.inputs import InputProblem
from agent_operator.reconcile import plan_agent
from agent_operator.settings import RenderSettings
from agent_operator.status import (
    DeploymentState,
    Outcome,
    agent_status,
    rollout_progress_only,
    status_changed,
    warning_event,
)
from tests.unit.operator.specimens import inputs

OUTCOME = Outcome.from_plan(plan_agent(inputs(), settings=RenderSettings()))


def _state(
    component: str, *, ready: int = 1, replicas: int = 1, applied: str | None = None
) -> DeploymentState:
    return DeploymentState(
        replicas=replicas,
        updated_replicas=ready,
        ready_replicas=ready,
        available_replicas=ready,
        generation=2,
        observed_generation=2,
        applied_hash=applied if applied is not None else (OUTCOME.deployment_hashes or {})[component],
    )


def _status(previous: dict, deployments: dict, *, outcome: Outcome = OUTCOME, now: str = "T1") -> dict:
    return agent_status(
        generation=3,
        previous=previous,
        outcome=outcome,
        deployments=deployments,
        memory_enabled=False,
        now=now,
    )


def _cond(status: dict, kind: str) -> dict:
    return next(c for c in status["conditions"] if c["type"] == kind)


def test_ready_when_bundle_current_and_components_available() -> None:
    status = _status({}, {"aer": _state("aer"), "tool": _state("tool")})
    assert _cond(status, "Ready")["status"] == "True"
    assert _cond(status, "MemoryReady")["reason"] == "Disabled"
    assert status["bundle"]["toolCount"] == 2 and status["observedGeneration"] == 3
    assert all(c["observedGeneration"] == 3 for c in status["conditions"])


def test_not_ready_while_rolling_out_or_not_yet_updated() -> None:
    rolling = _status({}, {"aer": _state("aer", ready=0), "tool": _state("tool")})
    assert _cond(rolling, "Ready")["status"] == "False"
    assert _cond(rolling, "AERReady")["reason"] == "RolloutInProgress"
    stale = _status({}, {"aer": _state("aer", applied="old"), "tool": _state("tool")})
    assert _cond(stale, "AERReady")["reason"] == "Updating"
    missing = _status({}, {"tool": _state("tool")})
    assert _cond(missing, "AERReady")["reason"] == "DeploymentMissing"


def test_not_ready_while_a_replaced_pod_still_runs() -> None:
    """A rollout that made every new pod available is not done while an old pod still answers."""
    done = _state("aer")
    cases = {
        "an old pod not yet stopped": dataclasses.replace(done, current_pods=2),
        "an old pod terminating": dataclasses.replace(done, current_pods=1, terminating_pods=1),
    }
    for case, aer in cases.items():
        status = _status({}, {"aer": aer, "tool": _state("tool")})
        assert _cond(status, "Ready")["status"] == "False", case
        assert _cond(status, "AERReady")["reason"] == "RolloutInProgress", case
        assert "1 replaced pod still running" in _cond(status, "AERReady")["message"], case
    gone = _status({}, {"aer": dataclasses.replace(done, current_pods=1), "tool": _state("tool")})
    assert _cond(gone, "Ready")["status"] == "True"


def test_the_live_deployment_counts_replaced_pods() -> None:
    body = {
        "metadata": {"generation": 4, "annotations": {}},
        "spec": {"replicas": 1},
        "status": {
            "observedGeneration": 4,
            "replicas": 1,
            "updatedReplicas": 1,
            "availableReplicas": 1,
            "terminatingReplicas": 1,
        },
    }
    state = DeploymentState.from_body(body)
    assert (state.current_pods, state.terminating_pods) == (1, 1)
    assert DeploymentState.from_body({**body, "status": {"replicas": 1}}).terminating_pods == 0


def test_unchanged_world_gives_identical_status_and_no_write() -> None:
    deployments = {"aer": _state("aer"), "tool": _state("tool")}
    first = _status({}, deployments, now="T1")
    second = _status(first, deployments, now="T2")
    assert second == first
    assert not status_changed(first, second)


def test_transition_time_moves_only_when_status_changes() -> None:
    first = _status({}, {"aer": _state("aer", ready=0), "tool": _state("tool")}, now="T1")
    second = _status(first, {"aer": _state("aer"), "tool": _state("tool")}, now="T2")
    assert _cond(second, "AERReady")["lastTransitionTime"] == "T2"
    assert _cond(second, "ToolReady")["lastTransitionTime"] == "T1"


def test_bad_input_keeps_the_last_good_bundle_and_running_components() -> None:
    good = _status({}, {"aer": _state("aer"), "tool": _state("tool")})
    problem = InputProblem(reason="CatalogInvalid", condition="BundleReady", message="catalog broken")
    bad = _status(good, {"aer": _state("aer"), "tool": _state("tool")}, outcome=Outcome(problem=problem))
    assert _cond(bad, "Ready")["status"] == "False" and _cond(bad, "Ready")["reason"] == "CatalogInvalid"
    assert _cond(bad, "BundleReady")["status"] == "False"
    assert _cond(bad, "AERReady")["status"] == "True"  # the old pods still serve
    assert bad["bundle"] == good["bundle"]


def test_an_event_only_when_the_problem_is_new() -> None:
    problem = InputProblem(reason="ImageInvalid", message="spec.image bad")
    assert warning_event({}, problem) == ("ImageInvalid", "spec.image bad")
    refused = _status({}, {}, outcome=Outcome(problem=problem))
    assert warning_event(refused, problem) is None
    assert warning_event(refused, None) is None


def test_registered_says_whether_the_oe_can_run_the_agent() -> None:
    from dataclasses import replace

    deployments = {"aer": _state("aer"), "tool": _state("tool")}
    published = _status({}, deployments, outcome=replace(OUTCOME, registration=""))
    assert _cond(published, "Registered")["status"] == "True"
    failed = _status(published, deployments, outcome=replace(OUTCOME, registration="cannot write: HTTP 403"))
    assert (_cond(failed, "Registered")["status"], _cond(failed, "Registered")["reason"]) == (
        "False",
        "NotPublished",
    )
    assert "HTTP 403" in _cond(failed, "Registered")["message"]
    # Not attempted this time (bad input): the last known answer stays.
    kept = _status(failed, deployments, outcome=Outcome(problem=InputProblem(reason="X", message="m")))
    assert _cond(kept, "Registered")["status"] == "False"
    assert _cond(_status({}, deployments), "Registered")["status"] == "Unknown"
    # Registration does not gate Ready: a running Agent is Ready whether or not the OE knows it yet.
    assert _cond(failed, "Ready")["status"] == "True"


def test_rollout_progress_alone_is_told_apart_from_a_change_worth_writing_at_once() -> None:
    started = _status({}, {"aer": _state("aer", ready=0), "tool": _state("tool", ready=0)})
    one_up = _status(started, {"aer": _state("aer"), "tool": _state("tool", ready=0)})
    assert status_changed(started, one_up)  # a write is due, but it may wait for the next change
    assert rollout_progress_only(started, one_up)
    both_up = _status(one_up, {"aer": _state("aer"), "tool": _state("tool")})
    assert not rollout_progress_only(one_up, both_up)  # Ready: at once
    assert rollout_progress_only({}, started)  # a new Agent's first rollout: Ready may come first
    assert not rollout_progress_only({}, both_up)
    refused = _status(
        started,
        {"aer": _state("aer"), "tool": _state("tool", ready=0)},
        outcome=Outcome(problem=InputProblem(reason="SecretMissing", message="create it")),
    )
    assert not rollout_progress_only(started, refused)  # bad input: at once
