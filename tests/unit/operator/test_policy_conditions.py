"""Issue 34 at reconcile: a CEL condition that does not compile is a False Ready condition (and a Warning
Event) naming the rule's path; conditional rules and limits reach the OE's registration as written."""

from __future__ import annotations

import base64
import json

import pytest

from agent_operator.inputs import InputProblem
from agent_operator.models import Agent
from agent_operator.reconcile import plan_agent
from agent_operator.registration import render_registration
from agent_operator.settings import RenderSettings
from agent_runtime.oe.policy import Outcome, decide
from agent_runtime.oe.registration import REGISTRATION_KEY
from agent_runtime.oe.registry import parse_registration
from tests.unit.operator.specimens import agent_body, inputs

pytestmark = pytest.mark.unit

RULE = {"tool": "stripe.create_refund", "when": "args.amount > 10000", "approval": {"timeout": "30m"}}


@pytest.mark.parametrize(
    ("tools", "path", "problem"),
    [
        (
            {"requireApprovalWhen": [RULE, {"tool": "x", "when": "args.amount >"}]},
            "requireApprovalWhen[1].when",
            "Syntax error",
        ),
        (
            {"denyWhen": [{"tool": "x", "when": "amount > 1"}]},
            "denyWhen[0].when",
            "undeclared reference to 'amount'",
        ),
        ({"denyWhen": [{"tool": "x", "when": "tool"}]}, "denyWhen[0].when", "must be a bool expression"),
    ],
)
def test_a_condition_that_does_not_compile_is_refused_at_reconcile_with_its_path(
    tools: dict, path: str, problem: str
) -> None:
    with pytest.raises(InputProblem) as caught:
        plan_agent(inputs(agent=agent_body(tools=tools)), settings=RenderSettings())
    assert caught.value.reason == "PolicyConditionInvalid" and caught.value.condition == "Ready"
    assert f"spec.tools.{path}" in caught.value.message and problem in caught.value.message


def test_conditional_rules_and_limits_reach_the_registration() -> None:
    agent = Agent.from_body(
        agent_body(
            tools={"requireApprovalWhen": [RULE], "sensitive": "allow"},
            limits={"maxStepsPerExecution": 40, "toolCallsPerMinuteByTool": {"stripe.create_refund": 5}},
        )
    )
    plan_agent(inputs(agent=agent_body(tools={"requireApprovalWhen": [RULE]})), settings=RenderSettings())
    secret = render_registration(agent, token="t-1", settings=RenderSettings())
    raw = base64.b64decode(secret["data"][REGISTRATION_KEY])
    assert json.loads(raw)["limits"] == {
        "maxStepsPerExecution": 40,
        "toolCallsPerMinuteByTool": {"stripe.create_refund": 5},
    }
    reg = parse_registration(raw, source="test")
    assert reg.limits.max_steps_per_execution == 40
    facts = {
        "tool": "stripe.create_refund",
        "args": {"amount": 20000},
        "agent": reg.agent,
        "user": "",
        "step": 1,
        "usage": {},
    }
    held = decide(reg.policy, tool="stripe.create_refund", sensitive=True, facts=facts)
    assert (held.outcome, held.rule, held.approval.timeout if held.approval else None) == (
        Outcome.APPROVAL,
        "requireApprovalWhen[0]",
        "30m",
    )
    # An Agent without limits publishes the document it did before.
    plain = render_registration(Agent.from_body(agent_body()), token="t-1", settings=RenderSettings())
    assert "limits" not in json.loads(base64.b64decode(plain["data"][REGISTRATION_KEY]))
