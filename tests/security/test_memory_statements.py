"""Issue 27's Memory leftovers, with real processes: a tenant tool in the Tool Pod reads and writes its run's
user's memory with the OE's key mounted (the OE sends the run's memory statement with the tool call) and
still cannot name another user; and the OE's export route issues a read-only statement for one user."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.execution_token import PUBLIC_KEY_FILE_ENV
from agent_runtime.sdk.memory import MemoryClient, MemoryRequestError
from tests.conftest import Process
from tests.integration.loop.harness import AGENT, LOOP_TENANT, RUNTIME_TOKEN, Platform, Tenant
from tests.integration.memory.launched import MemoryServer, start_memory
from tests.providers.llm_peer import RunningLLMPeer

TENANT_DIR = Path(__file__).resolve().parent / "tenant"
WORKSPACE = AGENT.replace("/", ".")
PROJECT, NAME = AGENT.split("/", 1)


@pytest.fixture
def memory_platform(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> tuple[Platform, MemoryServer]:
    platform = Platform(
        tmp=tmp_path,
        spawn=spawn,
        llm_base_url=llm_peer.base_url,
        provider_url=provider_url,
    )
    (tmp_path / "memory-server").mkdir()
    # The Memory server holds the OE's public key and the Agent's runtime token, as the operator renders it.
    memory = start_memory(
        spawn,
        tmp_path / "memory-server",
        app_id=WORKSPACE,
        token=RUNTIME_TOKEN,
        extra={PUBLIC_KEY_FILE_ENV: str(platform.key_files()[1])},
    )
    platform.tenant = Tenant(
        entrypoint="memory_agent:app",
        pythonpath=TENANT_DIR,
        bundle=LOOP_TENANT.bundle,
        tool_env={**LOOP_TENANT.tool_env, "AGENTIC_MEMORY_URL": memory.base_url},
    )
    return platform.start(), memory


def _run(platform: Platform, user_id: str, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    with platform.client() as client:
        response = client.post(
            "/invoke",
            json={"agent": AGENT, "user_id": user_id, "input": {"calls": [list(call) for call in calls]}},
        )
    assert response.status_code == 202, response.text
    view = platform.wait(response.json()["execution_id"])
    assert view["status"] == "completed", view
    return list(view["result"]["results"])


@pytest.mark.timeout(180)
def test_a_tool_pod_tool_uses_its_runs_memory_and_no_other_users(
    memory_platform: tuple[Platform, MemoryServer],
) -> None:
    platform, memory = memory_platform
    wrote, mine = _run(platform, "alice", ("remember", {"text": "alice likes tea"}), ("recall", {}))
    # Before issue 27's fix the Tool Pod's call carried no statement: 403 statement_required here.
    assert wrote == {"user_id": "alice"}
    assert mine == {"facts": ["alice likes tea"]}
    # Bob's run sees only Bob's memory, and naming Alice from Bob's tool is refused.
    empty, stolen = _run(platform, "bob", ("recall", {}), ("recall_of", {"user_id": "alice"}))
    assert empty == {"facts": []}
    assert stolen == {"refused": 403, "error": "scope_not_granted"}
    # A direct call with the runtime token alone (tenant code outside a run) is refused too.
    with memory.client() as http:
        direct = http.post("/memory/semantic/search", json={"namespace": "prefs", "user_id": "alice"})
    assert direct.status_code == 403 and direct.json()["error"] == "statement_required"
    assert "aes1." not in platform.outputs() and "aes1." not in memory.process.output()


def _export(platform: Platform, body: dict[str, Any], *, agent: str = NAME) -> httpx.Response:
    with platform.client() as client:
        return client.post(f"/api/v1/projects/{PROJECT}/agents/{agent}/memory-export-token", json=body)


@pytest.mark.timeout(180)
def test_the_oe_issues_a_read_only_export_statement_for_one_user(
    memory_platform: tuple[Platform, MemoryServer],
) -> None:
    platform, memory = memory_platform
    _run(platform, "alice", ("remember", {"text": "alice likes tea"}))
    _run(platform, "bob", ("remember", {"text": "bob likes coffee"}))

    issued = _export(platform, {"user_id": "alice"})
    assert issued.status_code == 200, issued.text
    answer = issued.json()
    assert issued.headers["cache-control"] == "no-store"
    assert (answer["agent"], answer["user_id"], answer["purpose"]) == (AGENT, "alice", "export")
    assert answer["header"] == "x-agent-engine-statement"
    assert time.time() + 60 < answer["expires_at"] <= time.time() + 900

    # An export job holds the Agent's runtime token; the statement says whose memory it may read.
    client = MemoryClient(memory.base_url, token=RUNTIME_TOKEN, statement=answer["statement"])
    try:
        assert [hit.content for hit in client.search_sync(namespace="prefs")] == ["alice likes tea"]
        with pytest.raises(MemoryRequestError) as other:
            client.search_sync(namespace="prefs", user_id="bob")
        assert (other.value.status, other.value.error) == (403, "scope_not_granted")
        with pytest.raises(MemoryRequestError) as write:
            client.write_sync("alice likes nothing", namespace="prefs", embed=False)
        assert (write.value.status, write.value.error) == (403, "read_only_statement")
    finally:
        asyncio.run(client.aclose())

    # The statement opens only its Agent's Memory: the OE signs it for this Agent's workspace.
    with memory.client() as http:
        listed = http.post(
            "/memory/semantic/list",
            json={"namespace": "prefs"},
            headers={"x-agent-engine-statement": answer["statement"]},
        )
    assert [r["content"] for r in listed.json()["results"]] == ["alice likes tea"], listed.text

    # Bad input is a 400 naming the field; an unknown Agent a 404; the static token names a user.
    missing = _export(platform, {})
    assert missing.status_code == 400 and missing.json()["detail"][0]["field"] == "user_id"
    extra = _export(platform, {"user_id": "alice", "scope": "all"})
    assert extra.status_code == 400 and extra.json()["detail"][0]["field"] == "scope"
    assert _export(platform, {"user_id": "alice"}, agent="nobody").status_code == 404
    assert answer["statement"] not in platform.outputs() + memory.process.output()


@pytest.mark.timeout(120)
def test_an_oe_without_a_signing_key_says_so_instead_of_issuing_nothing(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> None:
    platform = Platform(
        tmp=tmp_path, spawn=spawn, llm_base_url=llm_peer.base_url, provider_url=provider_url, oe_keys=False
    ).start()
    response = _export(platform, {"user_id": "alice"})
    assert response.status_code == 409 and response.json()["error"] == "statements_disabled", response.text
