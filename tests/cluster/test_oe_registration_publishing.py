"""The operator publishes each Agent's OE registration (Decision 12), reports it, and takes it back."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

from agent_operator.registration import registration_secret_name
from agent_runtime.oe.registration import REGISTRATION_KEY, REGISTRATION_LABEL
from tests.cluster.operator_harness import Api, RunningOperator, apply_all, manifests, ready, wait_for


def test_registration_published_reported_pruned_and_withdrawn(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    # The chart's registrations' namespace (the harness applies it): the chart's Role lets the operator
    # publish there.
    where = f"{api.namespace}-registrations"
    operator = start_operator(extra_env={"AGENT_OPERATOR_REGISTRATIONS_NAMESPACE": where}, resync_seconds=2)

    def secret(name: str) -> dict | None:
        response = api.http.get(f"/api/v1/namespaces/{where}/secrets/{name}")
        return None if response.status_code == 404 else response.json()

    apply_all(api, manifests(api.namespace))
    ready(api)
    registered = wait_for(
        "Registered=True", lambda: api.condition("bot", "Registered").get("status") == "True"
    )
    assert registered
    name = registration_secret_name(api.namespace, "bot")
    published = secret(name)
    assert published is not None and published["metadata"]["labels"][REGISTRATION_LABEL] == "true"
    document = json.loads(base64.b64decode(published["data"][REGISTRATION_KEY]))
    token = base64.b64decode((api.get("secrets", "bot-runtime-token") or {})["data"]["token"]).decode()
    assert document["agent"] == f"{api.namespace}/bot" and document["token"] == token
    assert document["aerUrl"] == f"http://bot-aer.{api.namespace}.svc:8001"
    assert token not in operator.process.output()

    # A registration whose Agent is gone (deleted while no operator ran) is pruned by the resync.
    orphan = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": registration_secret_name(api.namespace, "ghost"),
            "namespace": where,
            "labels": {
                REGISTRATION_LABEL: "true",
                "agentengine.io/agent": "ghost",
                "agentengine.io/agent-namespace": api.namespace,
            },
        },
        "stringData": {REGISTRATION_KEY: "{}"},
    }
    created = api.http.post(f"/api/v1/namespaces/{where}/secrets", json=orphan)
    assert created.is_success, created.text
    wait_for("the orphan pruned", lambda: secret(orphan["metadata"]["name"]) is None, timeout=30)
    assert secret(name) is not None  # the live Agent's stays

    api.delete("agents", "bot")
    wait_for("the registration withdrawn", lambda: secret(name) is None, timeout=30)
