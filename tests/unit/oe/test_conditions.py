"""CEL conditions (issue 34): what compiles, what an expression answers, what fails closed, what the cost
limit stops. Tables of cases against the real CEL-C++ runtime."""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime.oe.conditions import (
    COST_LIMIT,
    ConditionError,
    ConditionFailed,
    compile_condition,
    estimate_cost,
    facts,
    input_sizes,
    shape_of,
)
from agent_runtime.oe.policy import Outcome, ToolPolicy, decide, policy_problems

pytestmark = pytest.mark.unit


def call(args: dict[str, Any] | None = None, **usage: float) -> dict[str, Any]:
    return facts(
        tool="stripe.create_refund", args=args or {}, agent="team-a/pay", user="alice", step=3, usage=usage
    )


@pytest.mark.parametrize(
    ("source", "args", "usage", "expected"),
    [
        ("args.amount > 10000", {"amount": 20000}, {}, True),
        ("args.amount > 10000", {"amount": 50}, {}, False),
        ("args.amount > 10000.0", {"amount": 20000}, {}, True),  # int against double: CEL compares
        ("args.amount > 10000", {"amount": 10000.5}, {}, True),
        ("tool.startsWith('stripe.') && user == 'alice'", {}, {}, True),
        ("agent == 'team-a/pay' && step == 3", {}, {}, True),
        ("usage.tokens >= 1000", {}, {"tokens": 1000}, True),
        ("usage.steps > 5", {}, {"steps": 2}, False),
        ("has(args.currency) && args.currency != 'EUR'", {}, {}, False),
        ("'vip' in args.tags", {"tags": ["new", "vip"]}, {}, True),
        ("args.customer.country == 'DE'", {"customer": {"country": "DE"}}, {}, True),
        ("args.email.matches('@example\\\\.com$')", {"email": "a@example.com"}, {}, True),
        ("args.items.exists(i, i.price > 100)", {"items": [{"price": 5}, {"price": 500}]}, {}, True),
    ],
)
def test_an_expression_answers_true_or_false(
    source: str, args: dict[str, Any], usage: dict[str, float], expected: bool
) -> None:
    assert compile_condition(source).evaluate(call(args, **usage)) is expected


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("args.amount >", "Syntax error"),
        ("tool > 1", "no matching overload"),
        ("amount > 1", "undeclared reference to 'amount'"),
        ("refund(args)", "undeclared reference to 'refund'"),
        ("tool", "must be a bool expression; this one gives a string"),
        ("step + 1", "gives a int"),
        ("", "is empty"),
        ("x" * 3000, "at most 2048"),
    ],
)
def test_an_expression_that_does_not_compile_is_refused_with_why(source: str, problem: str) -> None:
    with pytest.raises(ConditionError, match=None) as raised:
        compile_condition(source)
    assert problem in str(raised.value)


@pytest.mark.parametrize(
    ("source", "args", "problem"),
    [
        ("args.missing > 1", {}, "Key not found"),
        ("args.amount > 10000", {"amount": "12"}, "No matching overloads"),
        ("args.amount > 1", {"amount": 2**70}, "out of range"),
        ("args.flag", {"flag": "yes"}, "gave a string, not a bool"),
        ("args.n / args.d > 1", {"n": 1, "d": 0}, "divide by zero"),
    ],
)
def test_an_evaluation_error_fails_with_the_reason(source: str, args: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConditionFailed) as raised:
        compile_condition(source).evaluate(call(args))
    assert problem.lower() in str(raised.value).lower()


LOOP = "args.items.map(a, args.items.map(b, args.items.map(c, a + b))).size() > 0"
GROW = "args.items.map(a, args.s + args.s + args.s).size() > 0"


@pytest.mark.parametrize(
    ("source", "args", "stopped"),
    [
        (LOOP, {"items": list(range(5))}, False),  # 216 iterations: fine
        (LOOP, {"items": list(range(300))}, True),  # 27 million: refused before it runs
        (GROW, {"items": [1, 2], "s": "ab"}, False),
        (GROW, {"items": list(range(200)), "s": "x" * 200_000}, True),  # 120 MB of copies
        ("args.s.size() > 1", {"s": "x" * 1_000_000}, False),  # reading a large value is cheap
    ],
)
def test_the_cost_limit_stops_loops_and_huge_strings_before_they_run(
    source: str, args: dict[str, Any], stopped: bool
) -> None:
    condition = compile_condition(source)
    if stopped:
        with pytest.raises(ConditionFailed, match="estimated cost"):
            condition.evaluate(call(args))
    else:
        assert isinstance(condition.evaluate(call(args)), bool)


def test_the_estimate_grows_with_nesting_and_inputs() -> None:
    shape = shape_of(LOOP)
    assert shape.depth == 3
    assert (
        estimate_cost(shape, longest=5, string_bytes=0)
        < COST_LIMIT
        < estimate_cost(shape, longest=300, string_bytes=0)
    )
    assert shape_of("args.a > 1").depth == 0
    assert input_sizes({"args": {"l": [1, 2, 3], "s": "abcd"}, "tool": "t"}) == (
        3,
        7,
    )  # "abcd", "t" and the keys l and s


def test_policy_rules_with_conditions_hold_deny_and_fail_closed() -> None:
    policy = ToolPolicy.model_validate(
        {
            "sensitive": "allow",
            "deny": [{"tool": "stripe.*", "when": "args.currency == 'XTS'"}],
            "requireApproval": [
                {
                    "tool": "stripe.create_refund",
                    "when": "args.amount > 10000",
                    "approval": {"timeout": "30m"},
                },
                {"tool": "stripe.delete_*", "when": "args.nope > 0"},
            ],
        }
    )
    refund = "stripe.create_refund"

    def verdict(tool: str, args: dict[str, Any]) -> Any:
        return decide(policy, tool=tool, sensitive=True, facts=call(args) | {"tool": tool})

    assert verdict(refund, {"amount": 50, "currency": "EUR"}).outcome is Outcome.ALLOW
    held = verdict(refund, {"amount": 20000, "currency": "EUR"})
    assert (held.outcome, held.rule, held.approval and held.approval.timeout_s) == (
        Outcome.APPROVAL,
        "requireApproval[0]",
        1800.0,
    )
    denied = verdict(refund, {"amount": 5, "currency": "XTS"})
    assert (denied.outcome, denied.rule) == (Outcome.DENY, "deny[0]")
    # deny[0] cannot be evaluated without a currency: fail closed, saying where and why.
    broken = verdict(refund, {"amount": 5})
    assert broken.outcome is Outcome.DENY and broken.condition_failed
    assert "deny[0].when" in broken.reason and "could not be evaluated" in broken.reason
    assert decide(policy, tool=refund, sensitive=False).outcome is Outcome.DENY  # no facts: fail closed
    assert policy_problems(policy) == []
    bad = ToolPolicy.model_validate({"deny": ["x", {"tool": "y", "when": "args.a >"}]})
    assert [path for path, _ in policy_problems(bad)] == ["deny[1].when"]


@pytest.mark.parametrize("timeout", ["0s", "soon", "1d", "", "-5m"])
def test_an_approval_timeout_must_be_a_duration(timeout: str) -> None:
    with pytest.raises(ValueError, match=r"duration|longer than 0s"):
        ToolPolicy.model_validate({"approval": {"timeout": timeout}})
