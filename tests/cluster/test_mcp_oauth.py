"""MCP Connectors behind OAuth 2.1 on the real control plane (B-23): the operator discovers the tools with a
token of its own (client_credentials from the Connector's Secret) or with a person's login (the Secret
`mcp-oauth-<name>`, never refreshed by the operator); only the Tool Pod gets the writable token directory
and the login's Secret; the Tool Pod the operator rendered calls the server and refreshes on its own. No
token or secret in any status, Event or the operator's log."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from agent_runtime.connectors.mcp.oauth import OAuthSettings
from agent_runtime.connectors.mcp.oauth_flow import OAuthSession
from agent_runtime.connectors.mcp.oauth_store import DIR_ENV, TokenStore
from tests.cluster.operator_harness import GROUP, VERSION, Api, RunningOperator, manifests, ready, wait_for
from tests.conftest import REPO_ROOT, Process
from tests.integration.connectors.test_mcp_oauth import consent
from tests.providers.mcp_oauth_peer import CLIENT_ID, CLIENT_SECRET, OAuthPeer, mcp_oauth_server
from tests.rendered_pods import run_rendered_container


def _connector(
    name: str, url: str, auth: dict[str, Any], credentials: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Connector",
        "metadata": {"name": name, "namespace": "placeholder"},
        "spec": {"source": {"type": "mcp"}, "config": {"url": url, "auth": auth}, "credentials": credentials},
    }


async def _login(peer: OAuthPeer, directory: Path) -> str:
    """A person's consent for connector `crm2`, as `agentengine connectors login` makes it: the file."""
    store = TokenStore("crm2", env={DIR_ENV: str(directory)})
    settings = OAuthSettings(grant="authorization_code")
    session = OAuthSession(server="crm2", mcp_url=peer.url, settings=settings, store=store, timeout_s=10)
    drivers: list[asyncio.Task[None]] = []
    await session.login(open_url=lambda url: drivers.append(asyncio.create_task(consent(url))))
    await asyncio.gather(*drivers)
    return store.path.read_text()


def _discovered(api: Api, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        body = api.get("connectors", name) or {}
        return body if (body.get("status") or {}).get("discovery") else None

    return wait_for(f"{name}'s tools discovered", check, timeout=60)


def _execute(port: int, token: str, tool: str) -> dict[str, Any]:
    answer = httpx.post(
        f"http://127.0.0.1:{port}/execute",
        headers={"Authorization": f"Bearer {token}"},
        json={"tool": tool, "arguments": {"text": "hi"}, "execution_id": "e1", "step": 1},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_oauth_mcp_connectors_from_discovery_to_the_tool_pod(
    api: Api, start_operator: Callable[..., RunningOperator], spawn: Callable[..., Process], tmp_path: Path
) -> None:
    with mcp_oauth_server() as peer:
        login_file = asyncio.run(_login(peer, tmp_path / "laptop"))
        operator = start_operator(extra_env={"AGENT_OPERATOR_MCP_RETRY_SECONDS": "2"})
        objs = manifests(api.namespace)
        objs["oauth-client"] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "crm-oauth", "namespace": api.namespace},
            "stringData": {"id": CLIENT_ID, "secret": CLIENT_SECRET},
        }
        objs["login"] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "mcp-oauth-crm2", "namespace": api.namespace},
            "stringData": {"crm2.json": login_file},
        }
        objs["crm"] = _connector(
            "crm",
            peer.url,
            {"type": "oauth", "authorization_server": peer.issuer},
            [
                {"field": "client_id", "env": "CRM_CLIENT_ID",
                 "secretKeyRef": {"name": "crm-oauth", "key": "id"}},
                {"field": "client_secret", "env": "CRM_CLIENT_SECRET",
                 "secretKeyRef": {"name": "crm-oauth", "key": "secret"}},
            ],
        )  # fmt: skip
        objs["crm2"] = _connector("crm2", peer.url, {"type": "oauth", "grant": "authorization_code"}, [])
        for key in ("crm", "crm2"):
            objs[key]["metadata"]["namespace"] = api.namespace
        objs["agent"]["spec"]["connectors"] = ["crm", "crm2"]
        for key in ("oauth-client", "login", "llm", "crm", "crm2", "agent"):
            api.must_apply(objs[key])

        ids = {}
        for name in ("crm", "crm2"):
            body = _discovered(api, name)
            ids[name] = body["metadata"]["uid"].replace("-", "")[:8]
            assert f"mcp.{ids[name]}.echo" in body["status"]["discovery"]["tools"]
        issued = peer.stats()["issued"]
        assert issued["client_credentials"] == 1  # the operator's own token for crm
        assert issued.get("refresh_token", 0) == 0  # crm2: the login's access token, not refreshed

        agent = ready(api)
        tool = api.get("deployments", "bot-tool") or {}
        pod = tool["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["AGENTIC_MCP_OAUTH_DIR"] == "/tmp/mcp-oauth"
        seed = next(v for v in pod["volumes"] if v["name"] == "mcp-oauth-seed")
        assert [s["secret"]["name"] for s in seed["projected"]["sources"]] == [
            "mcp-oauth-crm",
            "mcp-oauth-crm2",
        ]
        assert "mcp-oauth" not in json.dumps(api.get("deployments", "bot-aer"))

        config_maps = {
            n: (api.get("configmaps", n) or {})["data"] for n in agent["status"]["bundle"]["configMaps"]
        }
        secrets = {
            name: {
                k: base64.b64decode(v).decode() for k, v in (api.get("secrets", name) or {})["data"].items()
            }
            for name in ("bot-runtime-token", "crm-oauth", "mcp-oauth-crm2", "llm-keys")
        }
        peer.revoke()  # every access token dead: the Tool Pod's crm2 call must refresh with the login's token
        _, port = run_rendered_container(
            deployment=tool,
            config_maps=config_maps,
            secrets=secrets,
            root=tmp_path / "tool",
            spawn=spawn,
            pythonpath=str(REPO_ROOT),
            overrides={"AGENT_ENTRYPOINT": ""},
        )
        runtime_token = secrets["bot-runtime-token"]["token"]
        for name in ("crm", "crm2"):
            outcome = _execute(port, runtime_token, f"mcp.{ids[name]}.echo")
            assert outcome["status"] == "success", outcome
            assert "echo: hi" in json.dumps(outcome["result"])
        issued = peer.stats()["issued"]
        assert issued["client_credentials"] == 2 and issued["refresh_token"] == 1
        kept = tmp_path / "tool" / "tmp" / "mcp-oauth"
        assert sorted(p.name for p in kept.glob("*.json")) == ["crm.json", "crm2.json"]
        tokens = [CLIENT_SECRET]
        for path in [*kept.glob("*.json"), tmp_path / "laptop" / "crm2.json"]:
            data = json.loads(path.read_text())
            tokens += [
                v for v in (data["tokens"].get("access_token"), data["tokens"].get("refresh_token")) if v
            ]

    texts = [json.dumps(api.get("connectors", n)) for n in ("crm", "crm2")] + [
        json.dumps(api.get("agents", "bot"))
    ]
    texts += [json.dumps(api.events(name)) for name in ("crm", "crm2", "bot")]
    texts.append(operator.process.output())
    for token in tokens:
        assert not [t for t in texts if token in t]
