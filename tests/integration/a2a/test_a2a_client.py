"""A2A agents as governed tools (issue 38, the client side): a Connector of type `agent` whose card is served
by the official SDK from its own process on loopback, called through real OE, AER and Tool Pod processes.
A read-only skill runs at once; a sensitive one is held, approved, and run once; a task that ends
`input-required` or `failed` is a tool error the agent sees; the peer's token never leaves the Tool Pod."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_operator.bundle import materialize
from agent_operator.discovery import McpDiscovery
from agent_operator.inputs import InputProblem
from agent_operator.models import Connector
from agent_runtime.connectors import (
    build_bundle,
    compile_catalog,
    materialize_connector,
    scaffold_tool_yaml,
    write_bundle,
)
from agent_runtime.connectors.builtin.agent import agent_connector, card_record
from agent_runtime.connectors.call_key import message_id
from agent_runtime.connectors.framework import ConnectorConfigError
from tests.conftest import REPO_ROOT, Process, free_port
from tests.integration.a2a.a2a_peer import TOKEN_ENV
from tests.integration.loop.harness import LOOP_TENANT, PLANTED, Platform, Tenant
from tests.integration.runtime.launched import PROVIDER_OPENAPI
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer
from tests.unit.operator.specimens import connector_body

pytestmark = pytest.mark.integration
PEER_TOKEN = "a2a-peer-token-9d81c4e2"
PEER = "a2a_ledger_peer"


class RunningPeer:
    def __init__(self, spawn: Callable[..., Process], tmp: Path, *, token: str = PEER_TOKEN) -> None:
        self.port = free_port()
        self.ledger = tmp / "peer-ledger.txt"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(REPO_ROOT),
            TOKEN_ENV: token,
        }
        self.process = spawn(
            [sys.executable, "-m", "tests.integration.a2a.a2a_peer", str(self.port), str(self.ledger)],
            env=env,
            name="a2a-peer",
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(self.card_url, timeout=0.5)
                return
            except httpx.TransportError:
                time.sleep(0.05)
        raise TimeoutError(f"the A2A peer did not start:\n{self.process.output()}")

    @property
    def card_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/.well-known/agent-card.json"

    def transfers(self) -> list[str]:
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory, module_spawn: Callable[..., Process]) -> RunningPeer:
    return RunningPeer(module_spawn, tmp_path_factory.mktemp("peer"))


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, module_spawn: Callable[..., Process], peer: RunningPeer
) -> Iterator[Platform]:
    def bundle(directory: Path, provider_url: str) -> Path:
        # As `python -m agent_runtime.connectors bundle` would: the card fetched when the bundle is built.
        catalog = compile_catalog(PROVIDER_OPENAPI, connector_name="echo")
        echo = materialize_connector(scaffold_tool_yaml(catalog, base_url=provider_url), catalog)
        remote = agent_connector(
            "ledger-peer", card_url=peer.card_url, token_env="PEER_TOKEN", env={"PEER_TOKEN": PEER_TOKEN}
        )
        return write_bundle(build_bundle([echo], [remote]), directory)

    tenant = Tenant(
        entrypoint=LOOP_TENANT.entrypoint,
        pythonpath=LOOP_TENANT.pythonpath,
        bundle=bundle,
        tool_env={**LOOP_TENANT.tool_env, "PEER_TOKEN": PEER_TOKEN},
    )
    with running_llm_peer() as llm, running_echo_provider() as provider:
        yield Platform(
            tmp=tmp_path_factory.mktemp("platform"),
            spawn=module_spawn,
            llm_base_url=llm.base_url,
            provider_url=provider.url,
            tenant=tenant,
        ).start()


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"mode": "calls", "calls": [list(pair) for pair in pairs]}


def test_the_cards_skills_are_registered_as_tools_sensitive_unless_read_only(platform: Platform) -> None:
    registration = json.loads((platform.tmp / "registrations" / "team-a.loop.json").read_text())
    tools = {t["name"]: t for t in registration["tools"] if t["name"].startswith(PEER)}
    assert {n: t["sensitive"] for n, t in tools.items()} == {
        f"{PEER}.lookup": False,
        f"{PEER}.transfer": True,
        f"{PEER}.clarify": True,
        f"{PEER}.explode": True,
    }, tools


def test_a_read_only_skill_runs_at_once_and_answers_the_artifacts_text(platform: Platform) -> None:
    execution_id = platform.invoke(calls((f"{PEER}.lookup", {"text": "item 7"})))
    view = platform.wait(execution_id)
    assert view["status"] == "completed", view
    assert view["result"]["results"] == ["lookup done: item 7"], view["result"]


def test_a_sensitive_skill_is_held_approved_and_run_once(platform: Platform, peer: RunningPeer) -> None:
    before = peer.transfers()
    execution_id = platform.invoke(calls((f"{PEER}.transfer", {"data": {"amount": 5, "to": "bob"}})))
    view = platform.wait(execution_id)
    assert view["status"] == "suspended", view
    assert view["suspension"]["tool"] == f"{PEER}.transfer"
    assert peer.transfers() == before, "nothing may reach the remote agent before the approval"
    with platform.client() as client:
        resumed = client.post(
            f"/api/v1/projects/team-a/executions/{execution_id}/resume", json={"decision": "approved"}
        )
    assert resumed.status_code == 202, resumed.text
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    assert view["result"]["results"] == ['transfer done: {"amount": 5.0, "to": "bob"}']
    assert peer.transfers()[len(before) :] == ['transfer {"amount": 5.0, "to": "bob"}']
    # Its message id is derived from (execution, step): a resend of this call would carry the same one.
    sent = peer.ledger.with_name(peer.ledger.name + ".messages").read_text().splitlines()
    assert sent[-1] == message_id((execution_id, 1)) and execution_id not in sent[-1]
    decisions = [
        r["decision"]
        for r in platform.audit(execution_id)
        if r["kind"] == "tool" and r["tool"].startswith(PEER)
    ]
    assert decisions[0] == "approval" and decisions[-1] == "approved", decisions


def test_input_required_and_failed_tasks_are_tool_errors_the_agent_sees(platform: Platform) -> None:
    both = calls((f"{PEER}.clarify", {"text": "pay"}), (f"{PEER}.explode", {"text": "x"}))
    execution_id = platform.invoke(both)
    view = platform.wait(execution_id)
    # Both are sensitive: each held, approved, then run and failed as a tool error the agent goes on from.
    held = []
    for _ in range(2):
        assert view["status"] == "suspended", view
        held.append(view["suspension"]["tool"])
        with platform.client() as client:
            client.post(
                f"/api/v1/projects/team-a/executions/{execution_id}/resume", json={"decision": "approved"}
            ).raise_for_status()
        view = platform.wait(execution_id, "completed", "failed", "suspended")
    assert held == [f"{PEER}.clarify", f"{PEER}.explode"]
    assert view["status"] == "completed", view
    clarify, explode = view["result"]["results"]
    assert "agent_input_required" in clarify["text"] and "Which account do you mean?" in clarify["text"]
    assert "agent_failed" in explode["text"] and "broke on purpose" in explode["text"]


def test_the_peers_token_never_leaves_the_tool_pod(platform: Platform) -> None:
    outputs = platform.outputs()
    for secret in (*PLANTED, PEER_TOKEN):
        assert secret not in outputs
    bundle_text = "".join(p.read_text() for p in (platform.tmp / "bundle").iterdir())
    assert PEER_TOKEN not in bundle_text and "PEER_TOKEN" in bundle_text


# The operator's side: a Connector of type `agent` discovered at reconcile time, its bundle file built from
# the recorded card alone (against an open peer: a Secret needs the API server, the cluster tier's part).


@pytest.fixture(scope="module")
def open_peer(tmp_path_factory: pytest.TempPathFactory, module_spawn: Callable[..., Process]) -> RunningPeer:
    return RunningPeer(module_spawn, tmp_path_factory.mktemp("open-peer"), token="")


def agent_body(card_url: str, **spec: Any) -> dict[str, Any]:
    body = connector_body("ledger-peer")
    body["spec"] = {"source": {"type": "agent"}, "config": {"card_url": card_url}, **spec}
    body["status"] = {}
    return body


def test_the_operator_discovers_the_card_and_builds_the_bundle_from_the_record(
    open_peer: RunningPeer,
) -> None:
    discovery = McpDiscovery(api=None)  # type: ignore[arg-type]  # no credential: no Secret is read
    body = agent_body(open_peer.card_url, expose={"allow": ["lookup", "transfer"]})
    found = asyncio.run(discovery.refresh(("ns", "ledger-peer"), body))
    assert found is not None and found.condition.status == "True", found
    assert found.record is not None and found.record["tools"] == [f"{PEER}.lookup", f"{PEER}.transfer"]
    defs = materialize(found.connector, {})
    assert [(t.name, t.sensitive) for t in defs.tools] == [
        (f"{PEER}.lookup", False),
        (f"{PEER}.transfer", True),
    ]
    assert defs.type == "agent" and defs.config["card_url"] == open_peer.card_url
    # The next reconcile (not due) gives the same record; a card that cannot be read keeps it in service.
    again = asyncio.run(discovery.refresh(("ns", "ledger-peer"), {**body, "status": found.connector.status}))
    assert again is not None and again.record == found.record
    gone = agent_body(open_peer.card_url.replace("agent-card.json", "nothing.json"))
    gone["status"] = found.connector.status
    failed = asyncio.run(discovery.refresh(("ns", "other"), gone))
    assert failed is not None and failed.condition.status == "False"
    assert failed.condition.reason == "ServerRefused" and "stays in service" in failed.condition.message
    assert failed.record == found.record


def test_an_undiscovered_agent_connector_is_not_ready_and_an_unknown_skill_is_named() -> None:
    with pytest.raises(InputProblem) as caught:
        materialize(Connector.from_body(agent_body("http://peer.example:80/card.json")), {})
    assert caught.value.reason == "ToolsNotDiscovered" and "A2A agent card" in caught.value.message
    record = card_record(
        {"name": "p", "skills": [{"id": "lookup", "tags": ["readonly"]}, {"id": "9bad", "tags": []}]},
        connector="ledger-peer",
        allow=None,
        previous=None,
        now="2026-12-03T00:00:00Z",
    )
    assert record["tools"] == [f"{PEER}.lookup"] and record["skipped"][0]["tool"] == "9bad"
    with pytest.raises(ConnectorConfigError) as refused:
        card_record(
            record | {"skills": record["catalog"]},
            connector="ledger-peer",
            allow=["nope"],
            previous=None,
            now="",
        )
    assert refused.value.field == "expose.allow"
