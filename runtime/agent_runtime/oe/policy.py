"""Tool and LLM call policy: a pure decision, made before anything runs (OE-07, Decision 6, issue 34).

The types are what the Agent's `spec.tools` holds, so the operator renders them straight from the CRD
(camelCase on the wire) into the Agent's registration, and the OE decides with `decide()`. A `deny` or
`requireApproval` entry is a name (or pattern), or a rule `{tool, when, approval}` whose `when` is a CEL
condition over the call (oe/conditions.py): the rule applies only when it holds, and an expression that
cannot be evaluated denies the call (fail closed), saying why.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from agent_runtime.oe.conditions import ConditionError, ConditionFailed, compile_condition
from agent_runtime.protocol import INVOKE_LLM

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


class Outcome(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    APPROVAL = "approval"


def duration_seconds(text: str) -> float:
    """`30m`, `1h30m`, `90s` (Kubernetes' Go duration spelling, whole units) as seconds."""
    match = _DURATION.match(text.strip())
    if not text.strip() or match is None:
        raise ValueError(f"{text!r} is not a duration: write e.g. 30m, 1h, 90s or 1h30m")
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise ValueError(f"{text!r} must be longer than 0s")
    return float(total)


class ApprovalSettings(BaseModel):
    """How long a held call waits for a reviewer, and what the OE decides when nobody did."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    timeout: str
    on_timeout: Literal["reject", "approve"] = "reject"

    @field_validator("timeout")
    @classmethod
    def _duration(cls, value: str) -> str:
        duration_seconds(value)
        return value

    @property
    def timeout_s(self) -> float:
        return duration_seconds(self.timeout)


class ToolRule(BaseModel):
    """A `deny` or `requireApproval` entry with a condition: it applies to `tool` when `when` holds."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    tool: str = Field(min_length=1, max_length=256)
    when: str | None = Field(default=None, max_length=2048)
    approval: ApprovalSettings | None = None


Rule = str | ToolRule


class ToolPolicy(BaseModel):
    """`spec.tools` of an Agent. Names are exact tool names or shell-style patterns (`stripe_*`).

    `allow` unset means every known tool may run; set, only the tools it matches. `deny` always wins.
    `requireApproval` sends a call to a human first. `sensitive` is what happens to a sensitive tool
    that no list names: `approve` (the default), `allow` or `deny`. LLM calls are named `invoke_llm`.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    allow: tuple[str, ...] | None = None
    deny: tuple[Rule, ...] = ()
    require_approval: tuple[Rule, ...] = ()
    # The CRD's typed lists of conditional rules (a CRD array cannot mix strings and objects): checked
    # after `deny` and `requireApproval` respectively, with the same meaning.
    deny_when: tuple[ToolRule, ...] = ()
    require_approval_when: tuple[ToolRule, ...] = ()
    sensitive: Literal["approve", "allow", "deny"] = "approve"
    # The Agent's approval deadline, for every held call whose rule sets none.
    approval: ApprovalSettings | None = None


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    reason: str
    rule: str | None = None  # the rule's path in spec.tools, e.g. requireApproval[0]
    approval: ApprovalSettings | None = None  # the deadline of a held call, when one is set
    condition_failed: bool = False  # denied because a condition could not be evaluated


def policy_problems(policy: ToolPolicy) -> list[tuple[str, str]]:
    """Every condition that does not compile, as (path under spec.tools, problem): what the operator
    refuses at reconcile and the OE refuses when it loads the registration."""
    problems: list[tuple[str, str]] = []
    for field, rules in _rule_lists(policy):
        for index, rule in enumerate(rules):
            if isinstance(rule, ToolRule) and rule.when is not None:
                try:
                    compile_condition(rule.when)
                except ConditionError as exc:
                    problems.append((f"{field}[{index}].when", str(exc)))
    return problems


def _rule_lists(policy: ToolPolicy) -> tuple[tuple[str, tuple[Rule, ...]], ...]:
    return (
        ("deny", policy.deny),
        ("denyWhen", policy.deny_when),
        ("requireApproval", policy.require_approval),
        ("requireApprovalWhen", policy.require_approval_when),
    )


def _rule_tool(rule: Rule) -> str:
    return rule if isinstance(rule, str) else rule.tool


def _first_match(name: str, patterns: tuple[str, ...]) -> str | None:
    return next((p for p in patterns if fnmatch.fnmatchcase(name, p)), None)


def _applying(
    field: str, rules: tuple[Rule, ...], *, tool: str, facts: Mapping[str, Any] | None
) -> tuple[int, Rule, str | None] | None:
    """The first rule of `rules` that applies to this call: (index, rule, None), or (index, rule, why)
    when its condition could not be evaluated (the caller denies)."""
    for index, rule in enumerate(rules):
        if not fnmatch.fnmatchcase(tool, _rule_tool(rule)):
            continue
        if isinstance(rule, str) or rule.when is None:
            return index, rule, None
        where = f"{field}[{index}].when"
        if facts is None:
            return index, rule, f"{where}: the call's facts are not known here"
        try:
            if compile_condition(rule.when).evaluate(facts):
                return index, rule, None
        except (ConditionError, ConditionFailed) as exc:
            return index, rule, f"{where} {rule.when!r} could not be evaluated: {exc}"
    return None


def decide(
    policy: ToolPolicy, *, tool: str, sensitive: bool, facts: Mapping[str, Any] | None = None
) -> Decision:
    """The policy's outcome for one call of `tool` (`invoke_llm` for a model call); `facts` are what
    conditions see (oe/conditions.py `facts()`)."""
    denied = _applying("deny", policy.deny, tool=tool, facts=facts)
    field = "deny"
    if denied is None:
        denied, field = _applying("denyWhen", policy.deny_when, tool=tool, facts=facts), "denyWhen"
    if denied is not None:
        index, rule, failed = denied
        path = f"{field}[{index}]"
        if failed is not None:
            return Decision(Outcome.DENY, f"tool {tool!r} is denied: {failed}", path, condition_failed=True)
        why = f" when {rule.when!r}" if isinstance(rule, ToolRule) and rule.when else ""
        name = _rule_tool(rule)
        return Decision(
            Outcome.DENY, f"tool {tool!r} is denied by the Agent's policy (deny: {name!r}{why})", path
        )
    if policy.allow is not None and _first_match(tool, policy.allow) is None:
        return Decision(Outcome.DENY, f"tool {tool!r} is not in the Agent's allow list")
    held = _applying("requireApproval", policy.require_approval, tool=tool, facts=facts)
    field = "requireApproval"
    if held is None and (
        held := _applying("requireApprovalWhen", policy.require_approval_when, tool=tool, facts=facts)
    ):
        field = "requireApprovalWhen"
    if held is not None:
        index, rule, failed = held
        path = f"{field}[{index}]"
        if failed is not None:
            return Decision(Outcome.DENY, f"tool {tool!r} is denied: {failed}", path, condition_failed=True)
        why = f" when {rule.when!r}" if isinstance(rule, ToolRule) and rule.when else ""
        approval = rule.approval if isinstance(rule, ToolRule) and rule.approval else policy.approval
        return Decision(
            Outcome.APPROVAL,
            f"tool {tool!r} requires approval (requireApproval: {_rule_tool(rule)!r}{why})",
            path,
            approval,
        )
    if sensitive and tool != INVOKE_LLM:
        if policy.sensitive == "deny":
            return Decision(Outcome.DENY, f"tool {tool!r} is sensitive and the policy denies sensitive tools")
        if policy.sensitive == "approve":
            return Decision(
                Outcome.APPROVAL,
                f"tool {tool!r} is sensitive and needs a reviewer's approval",
                approval=policy.approval,
            )
    return Decision(Outcome.ALLOW, "allowed")


__all__ = [
    "ApprovalSettings",
    "Decision",
    "Outcome",
    "ToolPolicy",
    "ToolRule",
    "decide",
    "duration_seconds",
    "policy_problems",
]
