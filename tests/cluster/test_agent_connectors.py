"""A Connector of type `agent` on the real control plane (issue 38): the operator reads the A2A agent's
token from the Connector's Secret, fetches the card with it and records the skills in status, puts them in
the Agent's bundle, and the Tool Pod the operator rendered calls a skill with the same Secret's token; a
Secret holding another token is refused by the agent and said so in a condition. The token shows in no
status, Event or log."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.cluster.operator_harness import GROUP, VERSION, Api, RunningOperator, manifests, ready, wait_for
from tests.conftest import REPO_ROOT, Process
from tests.integration.a2a.test_a2a_client import PEER_TOKEN, RunningPeer
from tests.rendered_pods import run_rendered_container

TOOLS = "a2a_billing_peer"


def _secret(namespace: str, name: str, token: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": {"token": token},
    }


def _connector(namespace: str, name: str, *, card_url: str, secret: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Connector",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "source": {"type": "agent"},
            "config": {"card_url": card_url, "timeout_s": 30},
            "credentials": [
                {
                    "field": "token",
                    "env": "BILLING_PEER_TOKEN",
                    "secretKeyRef": {"name": secret, "key": "token"},
                }
            ],
        },
    }


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def test_the_operator_reads_an_agent_connectors_token_from_its_secret_and_the_tool_pod_calls_it(
    api: Api, start_operator: Callable[..., RunningOperator], spawn: Callable[..., Process], tmp_path: Path
) -> None:
    peer = RunningPeer(spawn, tmp_path)
    operator = start_operator()
    namespace = api.namespace
    objs = manifests(namespace)
    objs["agent"]["spec"]["connectors"] = ["billing-peer"]
    api.must_apply(_secret(namespace, "billing-peer", PEER_TOKEN))
    api.must_apply(_secret(namespace, "wrong-peer", "not-the-peers-token-5e1f"))
    api.must_apply(_connector(namespace, "billing-peer", card_url=peer.card_url, secret="billing-peer"))
    api.must_apply(_connector(namespace, "wrong-peer", card_url=peer.card_url, secret="wrong-peer"))
    for key in ("llm", "agent"):
        api.must_apply(objs[key])

    def discovered() -> dict[str, Any] | None:
        body = api.get("connectors", "billing-peer") or {}
        return body if (body.get("status") or {}).get("discovery") else None

    status = wait_for("the card's skills discovered", discovered, timeout=60)["status"]
    assert {f"{TOOLS}.lookup", f"{TOOLS}.transfer"} <= set(status["discovery"]["tools"]), status["discovery"]
    assert _condition(status, "Discovered")["reason"] == "Discovered"

    # The other Secret's token is not the agent's: its card is refused, and the condition says so.
    def refused() -> dict[str, Any] | None:
        body = api.get("connectors", "wrong-peer") or {}
        found = _condition(body.get("status") or {}, "Discovered")
        return found if found.get("status") == "False" else None

    refusal = wait_for("the wrong token refused", refused, timeout=60)
    assert refusal["reason"] == "ServerRefused" and "auth" in refusal["message"], refusal

    agent = ready(api)
    config_maps = {
        n: (api.get("configmaps", n) or {})["data"] for n in agent["status"]["bundle"]["configMaps"]
    }
    bundle_file = next(d[f] for d in config_maps.values() for f in d if f.startswith("billing-peer"))
    assert PEER_TOKEN not in bundle_file and "BILLING_PEER_TOKEN" in bundle_file
    tool_pod = (api.get("deployments", "bot-tool") or {})["spec"]["template"]["spec"]
    tool_env = {e["name"]: e for e in tool_pod["containers"][0]["env"]}
    reference = tool_env["BILLING_PEER_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert reference == {"name": "billing-peer", "key": "token"}
    assert "BILLING_PEER_TOKEN" not in json.dumps(api.get("deployments", "bot-aer"))

    # The Tool Pod the operator rendered sends the skill with the Secret's token.
    secrets = {
        name: {k: base64.b64decode(v).decode() for k, v in (api.get("secrets", name) or {})["data"].items()}
        for name in ("bot-runtime-token", "billing-peer", "llm-keys")
    }
    _, port = run_rendered_container(
        deployment=api.get("deployments", "bot-tool") or {},
        config_maps=config_maps,
        secrets=secrets,
        root=tmp_path / "tool",
        spawn=spawn,
        pythonpath=str(REPO_ROOT),
        overrides={"AGENT_ENTRYPOINT": ""},
    )
    answer = httpx.post(
        f"http://127.0.0.1:{port}/execute",
        headers={"Authorization": f"Bearer {secrets['bot-runtime-token']['token']}"},
        json={"tool": f"{TOOLS}.lookup", "arguments": {"text": "item 7"}, "execution_id": "e1", "step": 1},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    outcome = answer.json()
    assert outcome["status"] == "success" and outcome["result"] == "lookup done: item 7", outcome

    texts = [json.dumps(api.get("connectors", name)) for name in ("billing-peer", "wrong-peer")]
    texts += [json.dumps(api.get("agents", "bot"))]
    texts += [json.dumps(api.events(name)) for name in ("billing-peer", "wrong-peer", "bot")]
    assert not [t for t in texts if PEER_TOKEN in t]
    assert PEER_TOKEN not in operator.process.output()
