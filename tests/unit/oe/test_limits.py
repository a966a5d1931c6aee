"""Limits, deadlines and the audit chain (issue 34): the pure decisions, in tables."""

from __future__ import annotations

import pytest

from agent_runtime.audit_chain import link, record_hash, signed_head, verify
from agent_runtime.execution_token import generate_private_key_pem, public_key_pem
from agent_runtime.oe.deadlines import expired, stamp
from agent_runtime.oe.limits import (
    Limits,
    RateWindow,
    check_call,
    check_concurrency,
    check_day,
    day_ends,
    rate_windows,
)
from agent_runtime.oe.policy import ApprovalSettings

pytestmark = pytest.mark.unit
NOON = 1_764_720_000.0 + 12 * 3600  # 2025-12-03T12:00:00Z


@pytest.mark.parametrize(
    ("limits", "usage", "is_llm", "refused"),
    [
        ({}, {"steps": 10_000}, False, None),
        ({"maxStepsPerExecution": 3}, {"steps": 3}, False, None),
        ({"maxStepsPerExecution": 3}, {"steps": 4}, False, ("maxStepsPerExecution", 4)),
        (
            {"maxModelCallsPerExecution": 2},
            {"steps": 9, "model_calls": 3},
            True,
            ("maxModelCallsPerExecution", 3),
        ),
        ({"maxModelCallsPerExecution": 2}, {"steps": 9, "model_calls": 3}, False, None),  # a tool call
        ({"maxTokensPerExecution": 1000}, {"tokens": 999}, True, None),
        ({"maxTokensPerExecution": 1000}, {"tokens": 1000}, True, ("maxTokensPerExecution", 1000)),
        ({"maxCostPerExecution": 0.5}, {"cost": 0.75}, False, ("maxCostPerExecution", 0.75)),
    ],
)
def test_execution_limits(limits: dict, usage: dict, is_llm: bool, refused: tuple | None) -> None:
    refusal = check_call(Limits.model_validate(limits), usage, is_llm=is_llm)
    if refused is None:
        assert refusal is None
    else:
        assert refusal is not None and (refusal.limit, refusal.figure) == refused
        assert refusal.category == "budget_exceeded" and refused[0] in refusal.message


@pytest.mark.parametrize(
    ("limits", "agent_day", "user_day", "refused"),
    [
        ({"maxTokensPerDay": 100}, {"tokens": 99}, None, None),
        ({"maxTokensPerDay": 100}, {"tokens": 100}, None, "maxTokensPerDay"),
        ({"maxCostPerDay": 5}, {"cost": 7.5}, None, "maxCostPerDay"),
        ({"maxCostPerUserPerDay": 1}, {"cost": 50}, {"cost": 0.5}, None),
        ({"maxCostPerUserPerDay": 1}, {}, {"cost": 1}, "maxCostPerUserPerDay"),
        ({"maxTokensPerUserPerDay": 10}, {}, None, None),  # no user: no user budget
    ],
)
def test_daily_budgets_say_when_they_reset(
    limits: dict, agent_day: dict, user_day: dict | None, refused: str | None
) -> None:
    refusal = check_day(Limits.model_validate(limits), agent_day=agent_day, user_day=user_day, now=NOON)
    if refused is None:
        assert refusal is None
        return
    assert refusal is not None and refusal.limit == refused
    assert refusal.resets_at == day_ends(NOON) == NOON + 12 * 3600
    assert refusal.retry_after_s == 12 * 3600
    assert "resets at 2025-12-04T00:00:00Z" in refusal.message


def test_a_rate_window_is_a_token_bucket_of_slots() -> None:
    window = RateWindow("rate:a", "toolCallsPerMinute", 6)  # one token per 10 s, six at most
    assert window.slots(105.0) == [10, 9, 8, 7, 6, 5]
    assert window.retry_after(105.0) == pytest.approx(5.0)
    refusal = window.refusal(105.0)
    assert (refusal.category, refusal.value, refusal.figure) == ("rate_limited", 6, 7)
    limits = Limits.model_validate(
        {"toolCallsPerMinute": 60, "toolCallsPerMinuteByTool": {"stripe.refund": 2}}
    )
    assert [w.key for w in rate_windows(limits, agent="a/b", tool="stripe.refund")] == [
        "rate:a/b",
        "rate:a/b:stripe.refund",
    ]
    assert [w.key for w in rate_windows(limits, agent="a/b", tool="other")] == ["rate:a/b"]


@pytest.mark.parametrize(
    ("limits", "agent_running", "user_running", "refused"),
    [
        ({"maxConcurrentExecutions": 2}, 1, None, None),
        ({"maxConcurrentExecutions": 2}, 2, None, "maxConcurrentExecutions"),
        ({"maxConcurrentExecutionsPerUser": 1}, 50, 1, "maxConcurrentExecutionsPerUser"),
        ({"maxConcurrentExecutionsPerUser": 1}, 50, 0, None),
    ],
)
def test_concurrency(limits: dict, agent_running: int, user_running: int | None, refused: str | None) -> None:
    refusal = check_concurrency(
        Limits.model_validate(limits), agent_running=agent_running, user_running=user_running
    )
    assert (refusal.limit if refusal else None) == refused


def test_an_agents_limits_override_the_namespace_defaults_field_by_field() -> None:
    defaults = Limits.model_validate({"maxStepsPerExecution": 50, "maxCostPerDay": 10})
    mine = Limits.model_validate({"maxCostPerDay": 2})
    assert mine.merged_over(defaults) == Limits.model_validate(
        {"maxStepsPerExecution": 50, "maxCostPerDay": 2}
    )
    with pytest.raises(ValueError, match=r"maxStepsPerExecution|max_steps"):
        Limits.model_validate({"maxStepsPerExecution": 0})
    assert Limits.model_validate({"onExceed": "suspend"}).on_exceed == "suspend"  # oe/limit_holds.py
    with pytest.raises(ValueError, match=r"onExceed|on_exceed"):
        Limits.model_validate({"onExceed": "pause"})  # no such behaviour: refused, never ignored


@pytest.mark.parametrize(
    ("approval", "now", "decision"),
    [
        (None, 10_000.0, None),
        ({"timeout": "30m"}, 1000.0 + 1799, None),
        ({"timeout": "30m"}, 1000.0 + 1800, "rejected"),
        ({"timeout": "90s", "onTimeout": "approve"}, 1000.0 + 90, "approved"),
        ({"timeout": "1h30m", "onTimeout": "reject"}, 1000.0 + 5400, "rejected"),
    ],
)
def test_approval_deadlines(approval: dict | None, now: float, decision: str | None) -> None:
    settings = ApprovalSettings.model_validate(approval) if approval else None
    held = stamp({"kind": "approval_required", "step": 2}, settings, now=1000.0)
    found = expired(held, now=now)
    assert (found.decision if found else None) == decision
    if found is not None:
        assert "no reviewer decided within" in found.notes


def _chain(n: int) -> list[dict]:
    records: list[dict] = []
    for i in range(n):
        records.append(
            link(
                {"execution_id": "e", "step": i, "decision": "allow", "at": 1.5 + i},
                previous=records[-1] if records else None,
            )
        )
    return records


def test_the_audit_chain_finds_the_first_record_that_does_not_fit() -> None:
    pem = generate_private_key_pem()
    from cryptography.hazmat.primitives import serialization

    from agent_runtime.audit_chain import load_public_keys

    key = serialization.load_pem_private_key(pem.encode(), password=None)
    keys = load_public_keys([public_key_pem(pem)])
    records = _chain(5)

    def head(upto: int) -> dict:
        return signed_head(
            "e", seq=upto, digest=records[upto - 1]["hash"], sign=lambda data: ("k", key.sign(data))
        )  # type: ignore[union-attr]

    assert verify(records, head=head(5), public_keys=keys).intact
    edited = [dict(r) for r in records]
    edited[2]["decision"] = "deny"
    removed = records[:1] + records[2:]
    swapped = [records[0], records[2], records[1], *records[3:]]
    forged = dict(head(5), signature=head(4)["signature"])
    other_key = load_public_keys([public_key_pem(generate_private_key_pem())])
    cases = [
        (edited, head(5), keys, 3, "edited"),
        (removed, head(5), keys, 2, "removed"),
        (swapped, head(5), keys, 2, "reordered"),
        (records[:4], head(5), keys, 5, "removed from the end"),
        (records, forged, keys, 5, "signature"),
        (records, head(5), other_key, 5, "signature"),
        (records, None, keys, 5, "no chain head"),
    ]
    for chain, top, verifier, broken_at, reason in cases:
        verdict = verify(chain, head=top, public_keys=verifier)
        assert (verdict.intact, verdict.broken_at) == (False, broken_at), (reason, verdict)
        assert reason in (verdict.reason or ""), verdict
    # A field added to records later (None by default) leaves old hashes valid.
    assert record_hash({**records[0], "new_field": None}) == records[0]["hash"]
