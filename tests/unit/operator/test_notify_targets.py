"""Issue 34 at reconcile: an Agent's `spec.notify` is checked (each field it names, with the fix) and carried
into the OE's registration with its Secret values, which the OE parses into the targets oe/notify.py sends
to; nothing about the values reaches a message."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from agent_operator.inputs import AgentInputs, InputProblem, SecretMeta, agent_references
from agent_operator.models import Agent, Connector
from agent_operator.notify_targets import notify_document, notify_targets
from agent_operator.reconcile import plan_agent
from agent_operator.registration import render_registration
from agent_operator.settings import RenderSettings
from agent_runtime.oe.registration import REGISTRATION_KEY
from agent_runtime.oe.registry import parse_registration
from tests.unit.operator.specimens import agent_body, connector_body, petstore_text

pytestmark = pytest.mark.unit

HOOK_KEY = "whsec-unit-91c2"
SLACK_KEY = "xoxb-unit-4410"
WEBHOOK = {
    "type": "webhook",
    "url": "https://hooks.example.com/reviews",
    "signingSecretRef": {"name": "hook", "key": "hmac"},
}
SLACK = {"type": "slack", "connector": "team-slack", "channel": "#reviews"}


def slack_connector(**spec: Any) -> dict[str, Any]:
    body = connector_body("team-slack")
    body["spec"] = {
        "source": {"type": "slack"},
        "config": {"base_url": "https://slack.internal.example/api"},
        "credentials": [
            {"field": "token", "env": "SLACK_TOKEN", "secretKeyRef": {"name": "slack-bot", "key": "token"}}
        ],
        **spec,
    }
    return body


SECRETS = {
    "llm-keys": SecretMeta(resource_version="11", keys=frozenset({"openai"})),
    "petstore-creds": SecretMeta(resource_version="12", keys=frozenset({"token"})),
    "hook": SecretMeta(resource_version="21", keys=frozenset({"hmac"})),
    "slack-bot": SecretMeta(resource_version="22", keys=frozenset({"token"})),
}


def agent_inputs(
    notify: list[dict[str, Any]], *, slack: dict[str, Any] | None = None, secrets: dict | None = None
) -> AgentInputs:
    agent = Agent.from_body(agent_body(notify=notify))
    connectors = {
        "petstore": Connector.from_body(connector_body()),
        "team-slack": Connector.from_body(slack if slack is not None else slack_connector()),
    }
    return AgentInputs(
        agent=agent,
        connectors=connectors,
        config_maps={"petstore-openapi": {"openapi.json": petstore_text()}},
        secrets=SECRETS if secrets is None else secrets,
    )


def test_a_webhook_and_a_slack_target_are_planned_and_their_secrets_and_connector_are_references() -> None:
    given = agent_inputs([WEBHOOK, SLACK])
    plan_agent(given, settings=RenderSettings())
    refs = agent_references(given.agent, given.connectors)
    # A change of either Secret, or of the slack Connector, re-renders (and republishes) the Agent.
    assert {"hook", "slack-bot"} <= refs.secrets and "team-slack" in refs.connectors


@pytest.mark.parametrize(
    ("notify", "slack", "secrets", "reason", "says"),
    [
        ([WEBHOOK], None, {k: v for k, v in SECRETS.items() if k != "hook"}, "NotifySecretMissing",
         "spec.notify[0].signingSecretRef: Secret 'hook' does not exist"),
        ([SLACK, {**WEBHOOK, "signingSecretRef": {"name": "hook", "key": "other"}}], None, None,
         "NotifySecretKeyMissing", "spec.notify[1].signingSecretRef: Secret 'hook' has no key 'other'"),
        ([{**SLACK, "connector": "nope"}], None, None, "NotifyConnectorMissing",
         "spec.notify[0].connector: Connector 'nope' does not exist"),
        ([SLACK], slack_connector(source={"type": "github"}), None, "NotifyConnectorInvalid",
         "is of source.type 'github', not slack"),
        ([SLACK], slack_connector(credentials=[]), None, "NotifyConnectorInvalid",
         "no credential with field token"),
        ([SLACK], None, {k: v for k, v in SECRETS.items() if k != "slack-bot"}, "NotifySecretMissing",
         "spec.notify[0].connector (team-slack token): Secret 'slack-bot' does not exist"),
        ([{**WEBHOOK, "url": "http://169.254.169.254/latest"}], None, None, "NotifyUrlForbidden",
         "spec.notify[0].url"),
        ([{**WEBHOOK, "url": "https://hooks.example.com:99999/x"}], None, None, "NotifyUrlInvalid",
         "port from 1 to 65535"),
        ([{"type": "webhook", "url": "https://hooks.example.com/x"}], None, None, "NotifyInvalid",
         "needs url and signingSecretRef"),
    ],
)  # fmt: skip
def test_an_unusable_target_is_refused_naming_its_field(
    notify: list, slack: dict | None, secrets: dict | None, reason: str, says: str
) -> None:
    with pytest.raises(InputProblem) as caught:
        plan_agent(agent_inputs(notify, slack=slack, secrets=secrets), settings=RenderSettings())
    assert caught.value.reason == reason, caught.value.message
    assert says in caught.value.message and caught.value.condition == "Ready"


def test_the_registration_carries_the_targets_with_their_values_and_the_oe_parses_them() -> None:
    given = agent_inputs([WEBHOOK, SLACK])
    values = {("hook", "hmac"): HOOK_KEY, ("slack-bot", "token"): SLACK_KEY}
    document = notify_document(notify_targets(given.agent, given.connectors, values))
    secret = render_registration(given.agent, token="t-1", settings=RenderSettings(), notify=document)
    raw = base64.b64decode(secret["data"][REGISTRATION_KEY])
    assert json.loads(raw)["notify"] == [
        {"type": "webhook", "url": WEBHOOK["url"], "signingSecret": HOOK_KEY},
        {
            "type": "slack",
            "channel": "#reviews",
            "token": SLACK_KEY,
            "baseUrl": "https://slack.internal.example/api",
        },
    ]
    reg = parse_registration(raw, source="test")
    hook, slack = reg.notify
    assert hook.signing_secret is not None and hook.signing_secret.get_secret_value() == HOOK_KEY
    assert slack.token is not None and slack.token.get_secret_value() == SLACK_KEY
    assert (slack.channel, slack.base_url) == ("#reviews", "https://slack.internal.example/api")
    # Their repr (a log line, a traceback) masks both values.
    assert HOOK_KEY not in repr(reg) and SLACK_KEY not in repr(reg)
    # An Agent without targets publishes the document it did before.
    plain = render_registration(Agent.from_body(agent_body()), token="t-1", settings=RenderSettings())
    assert "notify" not in json.loads(base64.b64decode(plain["data"][REGISTRATION_KEY]))


def test_a_value_gone_since_the_reconcile_is_a_key_error_naming_no_value() -> None:
    given = agent_inputs([WEBHOOK])
    with pytest.raises(KeyError) as caught:
        notify_targets(given.agent, given.connectors, {})
    assert HOOK_KEY not in str(caught.value)
