"""A Connector's spec.headers on the real control plane: the API server refuses a bad header name, a
credential header and headers on a built-in type at admission; the operator carries plain headers into the
bundle's connector file; a value shaped like a token is refused at reconcile with a condition naming
`spec.headers.<name>`, and the value is in no status, Event or log line."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.cluster.operator_harness import Api, RunningOperator, apply_all, manifests, ready, wait_for

# Shaped like a GitHub token (built here so no scanner takes the test for a leak).
TOKEN_LIKE = "ghp_" + "Zq8Canary4hdr7Xw2Lm5Np9Rt3Vb6Yc1Ke0Fj"


@pytest.mark.parametrize(
    ("headers", "source", "says"),
    [
        ({"X Api Version": "1"}, None, "each name must be an HTTP header name"),
        ({"X-Api-Version:": "1"}, None, "each name must be an HTTP header name"),
        ({"authorization": "Bearer x"}, None, "may not set Authorization"),
        ({"Cookie": "a=b"}, None, "may not set Authorization, Proxy-Authorization or Cookie"),
        ({"X-Api-Version": "1\r\nX-Injected: 1"}, None, "spec.headers"),
        ({f"X-H{i}": "1" for i in range(17)}, None, "spec.headers"),
        ({"X-Api-Version": "1"}, {"type": "http"}, "spec.headers applies only to source.type openapi"),
    ],
)
def test_the_crd_refuses_bad_headers_at_admission(
    api: Api, headers: dict[str, str], source: dict[str, Any] | None, says: str
) -> None:
    connector = manifests(api.namespace)["connector"]
    connector["spec"]["headers"] = headers
    if source is not None:
        connector["spec"] = {"source": source, "config": {}, "headers": headers}
    refused = api.apply(connector)
    assert refused.status_code == 422, refused.text
    assert says in refused.text


def _connector_files(api: Api, agent: dict[str, Any]) -> dict[str, Any]:
    data = {
        key: value
        for name in agent["status"]["bundle"]["configMaps"]
        for key, value in ((api.get("configmaps", name) or {}).get("data") or {}).items()
    }
    return json.loads(data["petstore.yaml"])


def test_the_operator_carries_plain_headers_into_the_bundle_and_refuses_a_token_like_one(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    operator = start_operator()
    objs = manifests(api.namespace)
    objs["connector"]["spec"]["headers"] = {"X-Api-Version": "2022-11-28", "Accept": "application/json"}
    apply_all(api, objs)
    agent = ready(api)
    assert _connector_files(api, agent)["headers"] == {
        "x-api-version": "2022-11-28",
        "accept": "application/json",
    }
    good_bundle = agent["status"]["bundle"]["configMaps"]

    # The CRD cannot tell a token from a version; the operator can, and names the field, not the value.
    objs["connector"]["spec"]["headers"] = {"X-Api-Version": TOKEN_LIKE}
    api.must_apply(objs["connector"])
    cond = wait_for(
        "Ready False HeadersInvalid",
        lambda: (c := api.condition("bot")).get("reason") == "HeadersInvalid" and c,
    )
    assert "spec.headers.X-Api-Version" in cond["message"] and "spec.auth" in cond["message"], cond

    def connector_condition() -> dict[str, Any] | None:
        status = (api.get("connectors", "petstore") or {}).get("status") or {}
        conditions = status.get("conditions") or []
        return next((c for c in conditions if c.get("reason") == "HeadersInvalid"), None)

    connector = wait_for("the Connector's own condition", connector_condition)
    assert "spec.headers.X-Api-Version" in connector["message"]
    wait_for("an Event", lambda: any(e["reason"] == "HeadersInvalid" for e in api.events("bot")))
    assert (api.get("agents", "bot") or {})["status"]["bundle"]["configMaps"] == good_bundle
    # The value is in the Connector's spec (where its author wrote it) and nowhere the operator writes.
    statuses = [
        (api.get(kind, name) or {}).get("status")
        for kind, name in (("agents", "bot"), ("connectors", "petstore"))
    ]
    seen = json.dumps([statuses, api.list("events")]) + operator.process.output()
    assert TOKEN_LIKE not in seen
