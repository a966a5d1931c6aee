"""The OE's drain and interrupt decisions (`oe/drains.py`): what each answer does to a record."""

from __future__ import annotations

import pytest

from agent_runtime.oe.drains import (
    Answer,
    DrainCallerSettings,
    apply_answer,
    settle,
    valid_address,
)
from agent_runtime.oe.settings import SettingsError
from agent_runtime.oe.store.deliveries import DeliveryRecord, DeliveryTarget

T0 = 1_760_000_000.0


def target(component: str = "tool", **fields: object) -> DeliveryTarget:
    return DeliveryTarget(
        component=component, address=f"http://10.0.0.9:{8001 if component == 'aer' else 8002}", **fields
    )  # type: ignore[arg-type]


def record(kind: str = "drain", *targets: DeliveryTarget) -> DeliveryRecord:
    return DeliveryRecord(
        key=f"{kind}:e-1" if kind == "drain" else f"{kind}:e-1:3",
        kind=kind,  # type: ignore[arg-type]
        execution_id="e-1",
        agent="team-a/echo",
        workspace_id="team-a.echo",
        step=None if kind == "drain" else 3,
        request_id="req-1",
        deadline_at_ms=int((T0 + 30) * 1000) if kind == "drain" else None,
        targets=list(targets),
        created_at=T0,
        retry_until=T0 + 900,
        due=T0,
        updated_at=T0,
    )


def test_a_contract_outcome_is_final() -> None:
    for outcome in ("completed", "timed_out", "delivery_failed"):
        done = apply_answer("drain", target(), Answer(status=200, body={"outcome": outcome}), now=T0)
        assert (done.final, done.outcome, done.attempts) == (True, outcome, 1)
    failed = apply_answer(
        "drain",
        target(),
        Answer(status=200, body={"outcome": "delivery_failed", "reason_code": "execution_not_found"}),
        now=T0,
    )
    assert failed.reason_code == "execution_not_found"
    for outcome in ("interrupted", "not_found", "already_settled", "not_cancellable"):
        assert apply_answer(
            "interrupt", target(), Answer(status=200, body={"outcome": outcome}), now=T0
        ).final


def test_accepted_is_polled_again_soon_with_growing_gaps() -> None:
    accepted = Answer(status=202, body={"outcome": "accepted"})
    gaps = []
    current = target()
    for _ in range(8):
        current = apply_answer("drain", current, accepted, now=T0)
        assert not current.final and current.outcome == "accepted"
        gaps.append(round(current.next_at - T0, 3))
    assert gaps == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]


def test_failures_are_retried_with_backoff_and_say_why() -> None:
    current = target()
    for answer, problem in [
        (Answer(problem="ClientConnectorError"), "ClientConnectorError"),
        (Answer(status=503), "HTTP 503"),
        (Answer(status=401), "HTTP 401"),
        (Answer(status=403, body={"error": "workspace_mismatch"}), "HTTP 403 workspace_mismatch"),
        (Answer(status=400, body={"error": "deadline_too_far", "max_ms": 60000}), "deadline_too_far"),
        (Answer(status=200, body={"outcome": "something new"}), "HTTP 200"),
    ]:
        current = apply_answer("drain", current, answer, now=T0)
        assert not current.final and current.problem == problem
    assert current.delay_s == 16.0
    for _ in range(5):
        current = apply_answer("drain", current, Answer(status=500), now=T0)
    assert current.delay_s == 30.0


def test_only_completed_everywhere_is_quiet() -> None:
    aer = target("aer", outcome="completed", final=True)
    tool = target("tool", outcome="completed", final=True)
    assert settle(record("drain", aer, tool), now=T0, busy=False).state == "quiet"
    for outcome in ("timed_out", "delivery_failed"):
        ended = settle(record("drain", aer, target(outcome=outcome, final=True)), now=T0, busy=False)
        assert (ended.state, ended.outcome) == ("unconfirmed", outcome)
    # Nothing ever served it (cancelled before it started): nothing to drain, so it is quiet.
    assert settle(record("drain"), now=T0, busy=False).state == "quiet"


def test_a_drain_stays_open_while_a_runtime_has_not_answered_or_the_oe_still_waits_on_a_call() -> None:
    waiting = settle(record("drain", target(outcome="accepted", next_at=T0 + 0.4)), now=T0, busy=False)
    assert (waiting.state, waiting.due) == ("open", T0 + 0.4)
    busy = settle(record("drain", target(outcome="completed", final=True)), now=T0, busy=True)
    assert busy.state == "open" and busy.due > T0


def test_the_retry_window_closes_a_record_unconfirmed() -> None:
    late = T0 + 901
    ended = settle(record("drain", target(outcome="accepted"), target("aer")), now=late, busy=True)
    assert (ended.state, ended.outcome) == ("unconfirmed", "expired")
    assert [t.outcome for t in ended.targets] == ["expired", "expired"]


def test_an_interrupt_ends_with_the_most_telling_answer() -> None:
    answers = [
        ("not_found", "not_found"),
        ("interrupted", "not_found"),
        ("already_settled", "not_cancellable"),
    ]
    expected = ["not_found", "interrupted", "not_cancellable"]
    for (first, second), outcome in zip(answers, expected, strict=True):
        done = settle(
            record("interrupt", target("aer", outcome=first, final=True), target(outcome=second, final=True)),
            now=T0,
            busy=True,  # an interrupt does not wait on the OE's own calls
        )
        assert (done.state, done.outcome) == ("done", outcome)
    expired = settle(record("interrupt", target()), now=T0 + 901, busy=False)
    assert (expired.state, expired.outcome) == ("unconfirmed", "expired")


def test_only_plain_base_urls_are_pod_addresses() -> None:
    for good in ("http://10.1.2.3:8002", "http://[fd00::7]:8001", "https://agent-tool.ns.svc:8002"):
        assert valid_address(good)
    for bad in (
        None,
        "",
        "10.1.2.3:8002",
        "http://user:pw@10.1.2.3:8002",
        "http://10.1.2.3:8002/x",
        "ftp://h:1",
    ):
        assert not valid_address(bad)


def test_settings() -> None:
    assert DrainCallerSettings.from_env({}) == DrainCallerSettings(deadline_s=30.0, retry_window_s=900.0)
    assert DrainCallerSettings.from_env({"OE_DRAIN_DEADLINE_S": "5", "OE_DRAIN_RETRY_WINDOW_S": "60"}) == (
        DrainCallerSettings(deadline_s=5.0, retry_window_s=60.0)
    )
    with pytest.raises(SettingsError, match="OE_DRAIN_DEADLINE_S"):
        DrainCallerSettings.from_env({"OE_DRAIN_DEADLINE_S": "61"})
    with pytest.raises(SettingsError, match="OE_DRAIN_RETRY_WINDOW_S"):
        DrainCallerSettings.from_env({"OE_DRAIN_RETRY_WINDOW_S": "soon"})
