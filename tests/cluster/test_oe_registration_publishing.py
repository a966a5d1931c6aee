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
    # The test namespace plays the OE's namespace: the chart's Role lets the operator publish there.
    operator = start_operator(extra_env={"AGENT_OPERATOR_OE_NAMESPACE": api.namespace}, resync_seconds=2)
    apply_all(api, manifests(api.namespace))
    ready(api)
    registered = wait_for(
        "Registered=True", lambda: api.condition("bot", "Registered").get("status") == "True"
    )
    assert registered
    name = registration_secret_name(api.namespace, "bot")
    secret = api.get("secrets", name)
    assert secret is not None and secret["metadata"]["labels"][REGISTRATION_LABEL] == "true"
    document = json.loads(base64.b64decode(secret["data"][REGISTRATION_KEY]))
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
            "namespace": api.namespace,
            "labels": {
                REGISTRATION_LABEL: "true",
                "agentengine.io/agent": "ghost",
                "agentengine.io/agent-namespace": api.namespace,
            },
        },
        "stringData": {REGISTRATION_KEY: "{}"},
    }
    api.must_apply(orphan)
    wait_for("the orphan pruned", lambda: api.get("secrets", orphan["metadata"]["name"]) is None, timeout=30)
    assert api.get("secrets", name) is not None  # the live Agent's stays

    api.delete("agents", "bot")
    wait_for("the registration withdrawn", lambda: api.get("secrets", name) is None, timeout=30)
