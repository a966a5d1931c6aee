"""The registration Secret the operator publishes for the OE (Decision 12)."""

from __future__ import annotations

import base64
import json

import pytest
from pydantic import ValidationError

from agent_operator.models import Agent
from agent_operator.registration import registration_secret_name, render_registration
from agent_operator.settings import OperatorSettings, RenderSettings
from agent_runtime.oe.registration import REGISTRATION_KEY, REGISTRATION_LABEL
from agent_runtime.oe.registry import parse_registration
from tests.unit.operator.specimens import agent_body

TOKEN = "runtime-token-for-registration-test"


def _agent(**spec: object) -> Agent:
    return Agent.from_body(agent_body(**spec))


def test_the_oe_parses_what_the_operator_publishes() -> None:
    agent = _agent(tools={"allow": ["petstore_*", "invoke_llm"], "sensitive": "deny"})
    secret = render_registration(agent, token=TOKEN, settings=RenderSettings(oe_namespace="platform"))
    assert secret["metadata"]["namespace"] == "platform"
    assert secret["metadata"]["labels"][REGISTRATION_LABEL] == "true"
    raw = base64.b64decode(secret["data"][REGISTRATION_KEY])
    reg = parse_registration(raw, source="test")
    assert reg.agent == "team-a/support-bot"
    assert reg.token.get_secret_value() == TOKEN
    assert reg.aer_url == "http://support-bot-aer.team-a.svc:8001"
    assert reg.tool_url == "http://support-bot-tool.team-a.svc:8002"
    assert reg.policy.allow == ("petstore_*", "invoke_llm") and reg.policy.sensitive == "deny"
    assert reg.tools == ()  # the OE learns the tenant's tools from the AER
    assert json.loads(raw)["policy"]["allow"] == ["petstore_*", "invoke_llm"]


def test_agent_refs_reach_the_oe_as_tools_it_routes_itself() -> None:
    """spec.agentRefs (issue 38): a tool name each (agent.<name>, or agent.<namespace>.<name> for another
    namespace, unless one is given) and the Agent it starts; none set, the document has no field for it."""
    refs = [
        {"name": "billing"},
        {"name": "ledger", "namespace": "team-b", "sensitive": True},
        {"name": "support-bot", "tool": "ask_myself", "description": "me again"},
    ]
    secret = render_registration(_agent(agentRefs=refs), token=TOKEN, settings=RenderSettings())
    reg = parse_registration(base64.b64decode(secret["data"][REGISTRATION_KEY]), source="test")
    assert [(r.tool, r.agent, r.sensitive) for r in reg.agent_refs] == [
        ("agent.billing", "team-a/billing", False),
        ("agent.team-b.ledger", "team-b/ledger", True),
        ("ask_myself", "team-a/support-bot", False),
    ]
    entry = reg.tool("agent.team-b.ledger")
    assert entry is not None and entry.location == "agent" and entry.agent == "team-b/ledger"
    plain = render_registration(_agent(), token=TOKEN, settings=RenderSettings())
    assert "agentRefs" not in json.loads(base64.b64decode(plain["data"][REGISTRATION_KEY]))


def test_same_inputs_same_secret_and_names_fit() -> None:
    agent = _agent()
    settings = RenderSettings()
    assert render_registration(agent, token=TOKEN, settings=settings) == render_registration(
        agent, token=TOKEN, settings=settings
    )
    long_name = registration_secret_name("n" * 63, "a" * 253)
    assert len(long_name) <= 253
    assert long_name != registration_secret_name("n" * 63, "a" * 252 + "b")


def test_registrations_go_to_their_own_namespace_when_one_is_set() -> None:
    """The chart's layout (issue 43): registrations apart from the OE, whose NetworkPolicy peer stays put."""
    settings = OperatorSettings.from_env(
        {"AGENT_OPERATOR_OE_NAMESPACE": "platform", "AGENT_OPERATOR_REGISTRATIONS_NAMESPACE": "platform-reg"}
    ).render
    secret = render_registration(_agent(), token=TOKEN, settings=settings)
    assert secret["metadata"]["namespace"] == "platform-reg"
    assert settings.oe_namespace == "platform"
    # Unset: the OE's namespace, as before.
    assert RenderSettings(oe_namespace="platform").registration_namespace == "platform"


def test_the_agents_pricing_reaches_the_registration_the_oe_reads() -> None:
    """spec.pricing (issue 33) is carried into the registration; unset, the registration has none."""
    pricing = {"currency": "EUR", "models": {"support-model": {"input": 1.5, "output": 6, "cached": 0.5}}}
    secret = render_registration(_agent(pricing=pricing), token=TOKEN, settings=RenderSettings())
    reg = parse_registration(base64.b64decode(secret["data"][REGISTRATION_KEY]), source="test")
    assert reg.prices is not None and reg.prices.currency == "EUR"
    price = reg.prices.price_of("support-model")
    assert price is not None and (price.input, price.output, price.cached) == (1.5, 6.0, 0.5)
    plain = render_registration(_agent(), token=TOKEN, settings=RenderSettings())
    assert parse_registration(base64.b64decode(plain["data"][REGISTRATION_KEY]), source="test").prices is None


@pytest.mark.parametrize(
    ("pricing", "path"),
    [
        ({"models": {"support-model": {"input": -1, "output": 1}}}, "pricing.models.support-model.input"),
        ({"models": {"support-model": {"input": 1}}}, "pricing.models.support-model.output"),
        ({"models": {"m": {"input": 1, "output": 1, "cahced": 1}}}, "pricing.models.m.cahced"),
        ({"currency": " ", "models": {}}, "pricing.currency"),
    ],
)
def test_a_bad_price_is_refused_naming_the_field(pricing: dict[str, object], path: str) -> None:
    with pytest.raises(ValidationError) as refused:
        _agent(pricing=pricing)
    (error,) = refused.value.errors()
    assert ".".join(str(part) for part in error["loc"]).endswith(path)


def test_the_registration_carries_the_agents_conditions_and_bundle_digest() -> None:
    """The console's Agents page shows them (issue 30); an Agent without a status carries none."""
    body = agent_body()
    plain = json.loads(
        base64.b64decode(
            render_registration(Agent.from_body(body), token=TOKEN, settings=RenderSettings())["data"][
                REGISTRATION_KEY
            ]
        )
    )
    assert "status" not in plain
    body["status"] = {
        "observedGeneration": 3,
        "bundle": {"digest": "ab" * 32, "toolCount": 2, "configMaps": ["x"]},
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "AllComponentsReady", "message": "ok",
             "observedGeneration": 3, "lastTransitionTime": "2026-12-02T04:00:00Z"},
        ],
    }  # fmt: skip
    secret = render_registration(Agent.from_body(body), token=TOKEN, settings=RenderSettings())
    reg = parse_registration(base64.b64decode(secret["data"][REGISTRATION_KEY]), source="test")
    assert reg.status is not None and reg.status.bundle_digest == "ab" * 32
    assert reg.status.observed_generation == 3
    ready = reg.status.conditions[0]
    assert (ready.type, ready.status, ready.reason) == ("Ready", "True", "AllComponentsReady")
    assert ready.last_transition_time == "2026-12-02T04:00:00Z"
