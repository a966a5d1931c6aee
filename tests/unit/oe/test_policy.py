"""The policy decision: deny wins, allow lists restrict, approval for listed and sensitive tools."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent_runtime.oe.policy import Outcome, ToolPolicy, decide


def outcome(policy: ToolPolicy, tool: str, *, sensitive: bool = False) -> Outcome:
    return decide(policy, tool=tool, sensitive=sensitive).outcome


def test_default_policy_allows_plain_tools_and_sends_sensitive_ones_to_approval() -> None:
    policy = ToolPolicy()
    assert outcome(policy, "word_count") is Outcome.ALLOW
    assert outcome(policy, "sign_message", sensitive=True) is Outcome.APPROVAL


def test_deny_wins_over_allow_and_approval() -> None:
    policy = ToolPolicy(allow=("stripe_*",), deny=("stripe_delete*",), require_approval=("stripe_delete*",))
    decision = decide(policy, tool="stripe_deleteCustomer", sensitive=True)
    assert decision.outcome is Outcome.DENY
    assert "stripe_delete*" in decision.reason


def test_allow_list_refuses_tools_it_does_not_name() -> None:
    policy = ToolPolicy(allow=("echo_*",))
    assert outcome(policy, "echo_getItem") is Outcome.ALLOW
    decision = decide(policy, tool="word_count", sensitive=False)
    assert decision.outcome is Outcome.DENY
    assert "allow list" in decision.reason


def test_require_approval_applies_to_tools_that_are_not_sensitive() -> None:
    assert outcome(ToolPolicy(require_approval=("word_count",)), "word_count") is Outcome.APPROVAL


@pytest.mark.parametrize(("setting", "expected"), [("allow", Outcome.ALLOW), ("deny", Outcome.DENY)])
def test_sensitive_default_is_configurable(setting: str, expected: Outcome) -> None:
    policy = ToolPolicy(sensitive=setting)  # type: ignore[arg-type]
    assert outcome(policy, "sign_message", sensitive=True) is expected
    assert outcome(policy, "word_count") is Outcome.ALLOW


def test_llm_calls_are_policed_by_name() -> None:
    assert outcome(ToolPolicy(), "invoke_llm") is Outcome.ALLOW
    assert outcome(ToolPolicy(deny=("invoke_llm",)), "invoke_llm") is Outcome.DENY
    assert outcome(ToolPolicy(allow=("echo_*",)), "invoke_llm") is Outcome.DENY
    assert outcome(ToolPolicy(require_approval=("invoke_llm",)), "invoke_llm") is Outcome.APPROVAL


def test_policy_reads_the_crd_spelling_and_refuses_unknown_fields() -> None:
    policy = ToolPolicy.model_validate({"requireApproval": ["a"], "sensitive": "allow"})
    assert policy.require_approval == ("a",)
    with pytest.raises(ValidationError, match="requireAproval"):
        ToolPolicy.model_validate({"requireAproval": ["a"]})
    with pytest.raises(ValidationError, match="sensitive"):
        ToolPolicy.model_validate({"sensitive": "maybe"})
