"""Rotating an Agent's runtime token Secret (issue 22): the operator republishes the OE registration within
seconds, from its metadata watch (no resync), and rolls no pod: the pods read the mounted file in place."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable

from agent_operator.registration import registration_secret_name
from agent_runtime.oe.registration import REGISTRATION_KEY
from tests.cluster.operator_harness import Api, RunningOperator, apply_all, manifests, ready, wait_for

NEW_TOKEN = "rotated-runtime-token-6b1e0f9a"


def _registered_token(api: Api) -> str | None:
    name = registration_secret_name(api.namespace, "bot")
    response = api.http.get(f"/api/v1/namespaces/{api.namespace}-registrations/secrets/{name}")
    if response.status_code == 404:
        return None
    secret = response.json()
    return str(json.loads(base64.b64decode(secret["data"][REGISTRATION_KEY]))["token"])


def test_a_rotated_token_secret_is_republished_at_once_and_rolls_no_pod(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    # The chart's registrations' namespace (the harness applies it); resync off, so only the watch can notice
    # the rotation.
    where = f"{api.namespace}-registrations"
    operator = start_operator(extra_env={"AGENT_OPERATOR_REGISTRATIONS_NAMESPACE": where}, resync_seconds=0)
    apply_all(api, manifests(api.namespace))
    ready(api)
    old = wait_for("the registration", lambda: _registered_token(api))
    generations = {
        name: (api.get("deployments", name) or {})["metadata"]["generation"]
        for name in ("bot-aer", "bot-tool")
    }

    started = time.monotonic()
    patched = api.http.patch(
        api.path("secrets", "bot-runtime-token"),
        content=json.dumps({"data": {"token": base64.b64encode(NEW_TOKEN.encode()).decode()}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.is_success, patched.status_code
    wait_for("the new token registered", lambda: _registered_token(api) == NEW_TOKEN, timeout=30)
    print(f"measured: rotated token republished for the OE: {time.monotonic() - started:.2f}s")

    assert old != NEW_TOKEN
    assert {
        name: (api.get("deployments", name) or {})["metadata"]["generation"] for name in generations
    } == generations
    token = base64.b64decode((api.get("secrets", "bot-runtime-token") or {})["data"]["token"]).decode()
    assert token == NEW_TOKEN  # the operator leaves an edited token Secret as it is
    output = operator.process.output()
    assert old not in output and NEW_TOKEN not in output
