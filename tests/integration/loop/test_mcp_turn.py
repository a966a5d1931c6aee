"""MCP tools in a governed turn, end to end: agent.yaml `mcp.servers` discovered into the bundle, then the
real OE, AER and Tool Pod call a real MCP server (the official SDK, SSE answers) under the OE's policy."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_runtime.connectors import bundle_from_agent_config, write_bundle
from agent_runtime.connectors.mcp.catalog import server_id_for_name
from tests.conftest import Process
from tests.integration.loop.harness import LOOP_TENANT, Platform, Tenant
from tests.integration.loop.test_agent_turn import calls, tool_records
from tests.integration.runtime.launched import CONNECTOR_SECRET
from tests.providers.llm_peer import RunningLLMPeer, Turn
from tests.providers.mcp_peer import MCP_TOKEN, McpPeer, mcp_server

ID8 = server_id_for_name("crm")
LOOKUP, DELETE, FAIL = (f"mcp.{ID8}.{tool}" for tool in ("lookup", "delete_item", "fail"))


@pytest.fixture
def mcp_peer() -> Iterator[McpPeer]:
    with mcp_server(mode="sse") as peer:
        yield peer


@pytest.fixture
def mcp_platform(
    tmp_path: Path,
    spawn: Callable[..., Process],
    llm_peer: RunningLLMPeer,
    provider_url: str,
    mcp_peer: McpPeer,
) -> Platform:
    def bundle(directory: Path, _: str) -> Path:
        # Built ahead with the token (as the operator does), so the AER, which never gets it, needs no call.
        config = tmp_path / "agent.yaml"
        config.write_text(
            "version: 1\nmcp:\n  servers:\n    crm:\n"
            f"      url: http://${{CRM_HOST}}:{mcp_peer.port}/mcp\n      auth: {{token_env: CRM_MCP_TOKEN}}\n"
        )
        env = {"CRM_HOST": "127.0.0.1", "CRM_MCP_TOKEN": MCP_TOKEN}
        return write_bundle(bundle_from_agent_config(config, env=env), directory)

    tenant = Tenant(
        entrypoint=LOOP_TENANT.entrypoint,
        pythonpath=LOOP_TENANT.pythonpath,
        bundle=bundle,
        tool_env={"ECHO_TOKEN": CONNECTOR_SECRET, "CRM_MCP_TOKEN": MCP_TOKEN},
    )
    return Platform(
        tmp=tmp_path, spawn=spawn, llm_base_url=llm_peer.base_url, provider_url=provider_url, tenant=tenant
    ).start()


def test_mcp_tools_run_through_the_tool_pod_under_policy_and_approval(
    mcp_platform: Platform, mcp_peer: McpPeer, llm_peer: RunningLLMPeer
) -> None:
    platform = mcp_platform
    listed = mcp_peer.stats()["methods"].get("tools/list", 0)

    # A model-driven turn: the model sees mcp__<id8>__lookup and its answer maps back to the MCP tool.
    llm_peer.push(Turn.calls((f"mcp__{ID8}__lookup", {"id": "7"})), Turn.answer("item 7 found"))
    execution_id = platform.invoke({"mode": "llm", "text": "look up item 7"})
    view = platform.wait(execution_id)
    assert view["status"] == "completed", view
    offered = {t["function"]["name"] for t in llm_peer.requests[0].body["tools"]}
    assert {f"mcp__{ID8}__lookup", f"mcp__{ID8}__delete_item"} <= offered
    tool_messages = [m for m in llm_peer.requests[1].body["messages"] if m["role"] == "tool"]
    # lookup declares an output schema and its server answers both ways: the model is sent the structured
    # form alone, not the text block that repeats it.
    assert json.loads(tool_messages[0]["content"]) == {
        "structuredContent": {"id": "7", "name": "item 7"},
        "truncated": False,
    }
    records = sorted(tool_records(platform, execution_id), key=lambda r: r["step"])
    assert [(r["tool"], r["route"]) for r in records][1] == (LOOKUP, "tool_pod")

    # A read-only tool runs; a tool error reaches the agent; a tool without readOnlyHint waits for a person.
    execution_id = platform.invoke(calls((LOOKUP, {"id": "1"}), (FAIL, {}), (DELETE, {"id": "9"})))
    view = platform.wait(execution_id)
    assert view["status"] == "suspended", view
    assert view["suspension"]["kind"] == "approval_required" and view["suspension"]["tool"] == DELETE
    assert mcp_peer.stats()["calls"].get("delete_item", 0) == 0, "nothing may run before the approval"
    with platform.client() as client:
        resumed = client.post(
            f"/api/v1/projects/team-a/executions/{execution_id}/resume", json={"decision": "approved"}
        )
        assert resumed.status_code == 202, resumed.text
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    results = view["result"]["results"]
    assert results[0]["structuredContent"] == {"id": "1", "name": "item 1"}
    assert results[1]["error"] == "ToolExecutionError" and "tool_error" in results[1]["text"]
    assert "the item is locked" in results[1]["text"]
    assert results[2]["content"] == [{"type": "text", "text": "delete_item: 9"}]
    stats = mcp_peer.stats()
    assert stats["calls"]["delete_item"] == 1 and stats["calls"]["lookup"] == 2  # replay ran nothing twice
    decisions = [(r["tool"], r["decision"]) for r in tool_records(platform, execution_id)]
    assert (DELETE, "approval") in decisions and (DELETE, "approved") in decisions

    # No run asked the server for its tools, and the token shows nowhere.
    assert stats["methods"].get("tools/list", 0) == listed
    assert MCP_TOKEN not in platform.outputs()
    assert MCP_TOKEN not in json.dumps(platform.audit(execution_id)) + json.dumps(view)
