"""Tool and LLM call policy: a pure decision, made before anything runs (OE-07, Decision 6).

The types are what the Agent's `spec.tools` holds, so the operator renders them straight from the CRD
(camelCase on the wire) into the Agent's registration, and the OE decides with `decide()`.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from agent_runtime.protocol import INVOKE_LLM


class Outcome(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    APPROVAL = "approval"


class ToolPolicy(BaseModel):
    """`spec.tools` of an Agent. Names are exact tool names or shell-style patterns (`stripe_*`).

    `allow` unset means every known tool may run; set, only the tools it matches. `deny` always wins.
    `requireApproval` sends a call to a human first. `sensitive` is what happens to a sensitive tool
    that no list names: `approve` (the default), `allow` or `deny`. LLM calls are named `invoke_llm`.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    require_approval: tuple[str, ...] = ()
    sensitive: Literal["approve", "allow", "deny"] = "approve"


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    reason: str


def _first_match(name: str, patterns: tuple[str, ...]) -> str | None:
    return next((p for p in patterns if fnmatch.fnmatchcase(name, p)), None)


def decide(policy: ToolPolicy, *, tool: str, sensitive: bool) -> Decision:
    """The policy's outcome for one call of `tool` (`invoke_llm` for a model call)."""
    if (pattern := _first_match(tool, policy.deny)) is not None:
        return Decision(Outcome.DENY, f"tool {tool!r} is denied by the Agent's policy (deny: {pattern!r})")
    if policy.allow is not None and _first_match(tool, policy.allow) is None:
        return Decision(Outcome.DENY, f"tool {tool!r} is not in the Agent's allow list")
    if (pattern := _first_match(tool, policy.require_approval)) is not None:
        return Decision(Outcome.APPROVAL, f"tool {tool!r} requires approval (requireApproval: {pattern!r})")
    if sensitive and tool != INVOKE_LLM:
        if policy.sensitive == "deny":
            return Decision(Outcome.DENY, f"tool {tool!r} is sensitive and the policy denies sensitive tools")
        if policy.sensitive == "approve":
            return Decision(Outcome.APPROVAL, f"tool {tool!r} is sensitive and needs a reviewer's approval")
    return Decision(Outcome.ALLOW, "allowed")


__all__ = ["Decision", "Outcome", "ToolPolicy", "decide"]
