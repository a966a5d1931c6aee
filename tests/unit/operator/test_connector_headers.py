"""A Connector's spec.headers: plain default headers reach the bundle's connector file (tool.yaml's
`headers`, sent on every call); a header named or shaped like a credential is refused at reconcile with
a BundleReady condition naming `spec.headers.<name>`, never quoting the value."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_operator.bundle import BUNDLE
from agent_operator.inputs import InputProblem
from agent_operator.reconcile import Plan, plan_agent
from agent_operator.settings import RenderSettings
from tests.unit.operator.specimens import connector_body, inputs

SETTINGS = RenderSettings()
# A value shaped like a GitHub token, built here so no scanner takes the test for a leak.
TOKEN_LIKE = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _plan(headers: Any, **spec: Any) -> Plan:
    return plan_agent(inputs(connectors=[connector_body(headers=headers, **spec)]), settings=SETTINGS)


def _connector_file(plan: Plan) -> dict[str, Any]:
    files = {k: v for part in plan.bundle.parts for k, v in part.data.items()}
    return json.loads(files["petstore.yaml"])


def test_plain_headers_reach_the_bundles_connector_file() -> None:
    plan = _plan({"X-Api-Version": "2022-11-28", "Accept": "application/vnd.petstore+json"})
    assert _connector_file(plan)["headers"] == {
        "x-api-version": "2022-11-28",
        "accept": "application/vnd.petstore+json",
    }


def test_without_headers_the_connector_file_has_none() -> None:
    plan = plan_agent(inputs(connectors=[connector_body()]), settings=SETTINGS)
    assert "headers" not in _connector_file(plan)


def test_a_header_change_changes_the_bundle() -> None:
    one = _plan({"X-Api-Version": "2022-11-28"})
    two = _plan({"X-Api-Version": "2026-03-10"})
    assert one.bundle.digest != two.bundle.digest


@pytest.mark.parametrize(
    ("headers", "field", "why"),
    [
        ({"X-Api-Version": TOKEN_LIKE}, "spec.headers.X-Api-Version", "looks like a credential"),
        ({"X-Trace": "Bearer abc"}, "spec.headers.X-Trace", "looks like a credential"),
        ({"X-Api-Token": "plain"}, "spec.headers.X-Api-Token", "named like a credential"),
        ({"X-Version": "${PETSTORE_TOKEN}"}, "spec.headers.X-Version", "not expanded from the environment"),
        ({"Authorization": "Basic eA=="}, "spec.headers.Authorization", "sets Authorization itself"),
    ],
)
def test_a_header_like_a_secret_is_refused_naming_the_field(headers: Any, field: str, why: str) -> None:
    with pytest.raises(InputProblem) as caught:
        _plan(headers)
    assert caught.value.reason == "HeadersInvalid"
    assert caught.value.condition == BUNDLE
    assert caught.value.message.startswith(f"Connector petstore: {field}")
    assert why in caught.value.message
    assert "spec.auth" in caught.value.message
    for value in headers.values():
        assert value not in caught.value.message


def test_the_api_key_header_of_auth_is_no_default_header() -> None:
    auth = {
        "type": "api_key",
        "in": "header",
        "name": "X-Petstore-Key",
        "env": "PETSTORE_TOKEN",
        "secretKeyRef": {"name": "petstore-creds", "key": "token"},
    }
    with pytest.raises(InputProblem, match=r"spec\.headers\.X-Petstore-Key"):
        _plan({"X-Petstore-Key": "x"}, auth=auth)
