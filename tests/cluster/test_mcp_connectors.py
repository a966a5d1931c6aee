"""A Connector of type `mcp` on the real control plane (Decision 18): the operator discovers the tools of a
real MCP server (the official SDK, on loopback) with the token from the Connector's Secret, records them in
status, puts them in the Agent's bundle, discovers again on the annotation and on its period, keeps the
last good list while the server is down; the Tool Pod the operator rendered calls a tool. The token shows
in no status, Event or log."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.cluster.operator_harness import GROUP, VERSION, Api, RunningOperator, manifests, ready, wait_for
from tests.conftest import REPO_ROOT, Process
from tests.providers.mcp_peer import MCP_TOKEN, mcp_server
from tests.rendered_pods import run_rendered_container


def _objects(namespace: str, url: str) -> dict[str, dict[str, Any]]:
    objs = manifests(namespace)
    objs["mcp-token"] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "crm-mcp", "namespace": namespace},
        "stringData": {"token": MCP_TOKEN},
    }
    objs["crm"] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Connector",
        "metadata": {"name": "crm", "namespace": namespace},
        "spec": {
            "source": {"type": "mcp"},
            "config": {"url": url},
            "credentials": [
                {
                    "field": "token",
                    "env": "CRM_MCP_TOKEN",
                    "secretKeyRef": {"name": "crm-mcp", "key": "token"},
                }
            ],
        },
    }
    objs["agent"]["spec"]["connectors"] = ["crm"]
    return objs


def _discovered(api: Api, *, predicate: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        body = api.get("connectors", "crm") or {}
        status = body.get("status") or {}
        return body if status.get("discovery") and predicate(status) else None

    return wait_for(what, check, timeout=60)


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def _annotate(api: Api, value: str) -> None:
    answer = api.http.patch(
        api.path("connectors", "crm"),
        content=json.dumps({"metadata": {"annotations": {"agentengine.io/rediscover": value}}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    answer.raise_for_status()


def test_the_operator_discovers_an_mcp_server_and_the_tool_pod_calls_it(
    api: Api, start_operator: Callable[..., RunningOperator], spawn: Callable[..., Process], tmp_path: Path
) -> None:
    with mcp_server(mode="json") as peer:
        operator = start_operator(
            extra_env={"AGENT_OPERATOR_MCP_DISCOVERY_SECONDS": "4", "AGENT_OPERATOR_MCP_RETRY_SECONDS": "2"}
        )
        objs = _objects(api.namespace, peer.url)
        for key in ("mcp-token", "llm", "crm", "agent"):
            api.must_apply(objs[key])

        body = _discovered(
            api, predicate=lambda s: s["discovery"]["toolCount"] == 12, what="12 tools discovered"
        )
        id8 = body["metadata"]["uid"].replace("-", "")[:8]
        status = body["status"]
        assert status["discovery"]["tools"][:3] == [
            f"mcp.{id8}.lookup",
            f"mcp.{id8}.echo",
            f"mcp.{id8}.delete_item",
        ]
        assert status["toolCount"] == 12 and _condition(status, "Ready")["status"] == "True"
        assert _condition(status, "Discovered")["reason"] == "Discovered"
        assert status["discovery"]["server"]["name"] == "agent-engine-test-mcp"
        first_digest = status["discovery"]["digest"]

        agent = ready(api)
        assert agent["status"]["bundle"]["toolCount"] == 12
        config_maps = {
            n: (api.get("configmaps", n) or {})["data"] for n in agent["status"]["bundle"]["configMaps"]
        }
        bundle_file = json.loads(next(d["crm.yaml"] for d in config_maps.values() if "crm.yaml" in d))
        sensitive = {t["name"]: t["sensitive"] for t in bundle_file["tools"]}
        assert sensitive[f"mcp.{id8}.lookup"] is False and sensitive[f"mcp.{id8}.delete_item"] is True
        assert sensitive[f"mcp.{id8}.note"] is True  # no readOnlyHint: sensitive
        # lookup's output schema rode from the server through status into the bundle (results: structured).
        lookup = next(t for t in bundle_file["tools"] if t["name"] == f"mcp.{id8}.lookup")
        assert lookup["outputSchema"]["properties"]["name"] == {"type": "string"}
        assert next(t for t in status["discovery"]["catalog"] if t["name"] == "lookup")["outputSchema"]
        tool_pod = (api.get("deployments", "bot-tool") or {})["spec"]["template"]["spec"]
        tool_env = {e["name"]: e for e in tool_pod["containers"][0]["env"]}
        assert tool_env["CRM_MCP_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "crm-mcp", "key": "token"}
        aer = json.dumps(api.get("deployments", "bot-aer"))
        assert "CRM_MCP_TOKEN" not in aer

        # The Tool Pod the operator rendered calls the server with the Secret's token; no run discovers.
        secrets = {
            name: {
                k: base64.b64decode(v).decode() for k, v in (api.get("secrets", name) or {})["data"].items()
            }
            for name in ("bot-runtime-token", "crm-mcp", "llm-keys")
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
        # Counted just before the call: the operator's own 4-second period may discover while the pod starts.
        lists_before = peer.stats()["methods"]["tools/list"]
        answer = httpx.post(
            f"http://127.0.0.1:{port}/execute",
            headers={"Authorization": f"Bearer {secrets['bot-runtime-token']['token']}"},
            json={"tool": f"mcp.{id8}.lookup", "arguments": {"id": "42"}, "execution_id": "e1", "step": 1},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        outcome = answer.json()
        assert outcome["status"] == "success", outcome
        assert outcome["result"] == {"structuredContent": {"id": "42", "name": "item 42"}, "truncated": False}
        assert peer.stats()["methods"]["tools/list"] == lists_before

        # The server's tools change: the user's annotation discovers them now, and the Agent follows.
        peer.set_generation(2)
        _annotate(api, "1")
        body = _discovered(
            api,
            predicate=lambda s: f"mcp.{id8}.added_later" in s["discovery"]["tools"],
            what="the new tool discovered",
        )
        assert f"mcp.{id8}.note" not in body["status"]["discovery"]["tools"]
        wait_for(
            "the Agent's bundle follows",
            lambda: (
                (api.get("agents", "bot") or {}).get("status", {}).get("bundle", {}).get("digest")
                != agent["status"]["bundle"]["digest"]
            ),
        )

        # And back, on the period alone (no annotation, no spec change).
        peer.set_generation(1)
        _discovered(
            api, predicate=lambda s: s["discovery"]["digest"] == first_digest, what="periodic re-discovery"
        )
        port_of_server = peer.port

    # The server is down: the last good list stays in service, and a condition says so.
    _annotate(api, "2")
    body = _discovered(
        api,
        predicate=lambda s: _condition(s, "Discovered").get("status") == "False",
        what="Discovered False while the server is down",
    )
    status = body["status"]
    discovered = _condition(status, "Discovered")
    assert discovered["reason"] == "ServerUnreachable", discovered
    assert "stays in service" in discovered["message"] and str(port_of_server) not in discovered["message"]
    assert status["discovery"]["toolCount"] == 12 and _condition(status, "Ready")["status"] == "True"
    assert api.condition("bot", "BundleReady")["status"] == "True"

    # The token is in no status, Event or operator log line.
    texts = [json.dumps(api.get("connectors", "crm")), json.dumps(api.get("agents", "bot"))]
    texts += [json.dumps(api.events(name)) for name in ("crm", "bot")]
    assert not [t for t in texts if MCP_TOKEN in t]
    assert MCP_TOKEN not in operator.process.output()
