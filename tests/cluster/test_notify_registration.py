"""Issue 34's `spec.notify` through the real API server and operator: the CRD refuses a target missing what
its type needs (naming it), and the operator carries each target into the OE's registration with its Secret
values (the webhook's HMAC key, the slack Connector's bot token), republishing when a Secret changes; the
values reach no log, condition or Event. A CEL condition that does not compile is refused at reconcile
with its path (a False Ready and a Warning Event), applying nothing."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from agent_operator.registration import registration_secret_name
from agent_runtime.oe.registration import REGISTRATION_KEY
from tests.cluster.operator_harness import (
    GROUP,
    VERSION,
    Api,
    RunningOperator,
    apply_all,
    manifests,
    wait_for,
)

HOOK_KEY = "whsec-cluster-6d3a90"
HOOK_KEY_ROTATED = "whsec-cluster-rotated-21fe"
SLACK_KEY = "xoxb-cluster-0c77ab"
WEBHOOK = {
    "type": "webhook",
    "url": "https://hooks.example.com/reviews",
    "signingSecretRef": {"name": "review-hook", "key": "hmac"},
}
SLACK = {"type": "slack", "connector": "team-slack", "channel": "#reviews"}


def _agent(api: Api, name: str, notify: list[dict[str, Any]]) -> dict[str, Any]:
    body = manifests(api.namespace)["agent"]
    body["metadata"]["name"] = name
    body["spec"]["notify"] = notify
    return body


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            {"type": "webhook", "url": "https://h.example/x"},
            "a webhook target needs url and signingSecretRef",
        ),
        ({**WEBHOOK, "channel": "#x"}, "connector and channel apply only to type slack"),
        ({"type": "slack", "connector": "team-slack"}, "a slack target needs connector"),
        ({**SLACK, "url": "https://h.example/x"}, "url and signingSecretRef apply only to type webhook"),
        ({**WEBHOOK, "url": "ftp://h.example/x"}, "spec.notify[0].url"),
        ({"type": "email"}, "spec.notify[0].type"),
    ],
)
def test_a_target_missing_what_its_type_needs_is_refused_at_admission(
    api: Api, target: dict[str, Any], message: str
) -> None:
    response = api.apply(_agent(api, "bad-notify", [target]))
    assert response.status_code == 422, response.text
    assert message in response.text


def _registration(api: Api, where: str, name: str) -> dict[str, Any] | None:
    response = api.http.get(
        f"/api/v1/namespaces/{where}/secrets/{registration_secret_name(api.namespace, name)}"
    )
    if response.status_code == 404:
        return None
    return dict(json.loads(base64.b64decode(response.json()["data"][REGISTRATION_KEY])))


def test_the_operator_carries_spec_notify_into_the_registration_and_republishes_a_rotated_key(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    where = f"{api.namespace}-registrations"
    operator = start_operator(extra_env={"AGENT_OPERATOR_REGISTRATIONS_NAMESPACE": where}, resync_seconds=30)
    apply_all(api, manifests(api.namespace))
    for name, key, value in (("review-hook", "hmac", HOOK_KEY), ("slack-bot", "token", SLACK_KEY)):
        api.must_apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": api.namespace},
                "stringData": {key: value},
            }
        )
    api.must_apply(
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Connector",
            "metadata": {"name": "team-slack", "namespace": api.namespace},
            "spec": {
                "source": {"type": "slack"},
                "config": {"base_url": "https://slack.internal.example/api"},
                "credentials": [
                    {
                        "field": "token",
                        "env": "SLACK_TOKEN",
                        "secretKeyRef": {"name": "slack-bot", "key": "token"},
                    }
                ],
            },
        }
    )
    api.must_apply(_agent(api, "notified", [WEBHOOK, SLACK]))
    document = wait_for(
        "the registration with its notify targets",
        lambda: (doc := _registration(api, where, "notified")) and doc.get("notify") and doc,
    )
    assert document["notify"] == [
        {"type": "webhook", "url": WEBHOOK["url"], "signingSecret": HOOK_KEY},
        {
            "type": "slack",
            "channel": "#reviews",
            "token": SLACK_KEY,
            "baseUrl": "https://slack.internal.example/api",
        },
    ]
    wait_for("Registered=True", lambda: api.condition("notified", "Registered").get("status") == "True")

    # The HMAC key rotated: the registration carries the new one within seconds (not at the resync).
    api.must_apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "review-hook", "namespace": api.namespace},
            "stringData": {"hmac": HOOK_KEY_ROTATED},
        }
    )
    wait_for(
        "the rotated key in the registration",
        lambda: (
            ((_registration(api, where, "notified") or {}).get("notify") or [{}])[0].get("signingSecret")
            == HOOK_KEY_ROTATED
        ),
        timeout=20,
    )

    # A target whose Secret is missing: Ready=False naming the field, the value of no other Secret said.
    api.must_apply(
        _agent(api, "notified", [{**WEBHOOK, "signingSecretRef": {"name": "no-such", "key": "k"}}])
    )
    refused = wait_for(
        "Ready=False for the missing Secret",
        lambda: (c := api.condition("notified")).get("reason") == "NotifySecretMissing" and c,
    )
    assert "spec.notify[0].signingSecretRef" in refused["message"]
    said = json.dumps([api.get("agents", "notified"), api.events("notified")]) + operator.process.output()
    assert all(value not in said for value in (HOOK_KEY, HOOK_KEY_ROTATED, SLACK_KEY))


def test_a_condition_that_does_not_compile_is_refused_at_reconcile_with_its_path(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator(resync_seconds=30)
    apply_all(api, manifests(api.namespace))
    body = manifests(api.namespace)["agent"]
    body["metadata"]["name"] = "bad-cel"
    body["spec"]["tools"] = {
        "denyWhen": [{"tool": "refund", "when": "args.amount > 1"}, {"tool": "x", "when": "args.amount >"}]
    }
    api.must_apply(body)  # the schema takes any string: CEL is compiled by the operator, as the OE will
    refused = wait_for(
        "Ready=False PolicyConditionInvalid",
        lambda: (c := api.condition("bad-cel")).get("reason") == "PolicyConditionInvalid" and c,
    )
    assert refused["status"] == "False" and "spec.tools.denyWhen[1].when" in refused["message"]
    event = wait_for(
        "the Warning Event",
        lambda: next((e for e in api.events("bad-cel") if e["reason"] == "PolicyConditionInvalid"), None),
    )
    assert event["type"] == "Warning" and "spec.tools.denyWhen[1].when" in event["message"]
    assert api.get("deployments", "bad-cel-aer") is None  # bad input applies nothing
