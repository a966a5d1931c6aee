"""The Agent's agentRefs through the TypeScript AER (issue 38): the OE sends them with each run
(`AERExecuteRequest.agent_refs`), the TS AER adds them to the run's tools after the tenant's own, so the model
is offered them by their model names, and its call of one is a child execution the OE runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import Process
from tests.integration.loop.harness import AGENT
from tests.integration.ts_runner.node_platform import TS_LOOP_TENANT, NodePlatform, require_build
from tests.providers.llm_peer import RunningLLMPeer, Turn

AGENT_REFS = [{"tool": "agent.loop", "agent": AGENT, "description": "the loop Agent, once"}]


def test_a_model_is_offered_the_agent_refs_and_its_call_is_a_child(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> None:
    require_build("loop_agent")
    platform = NodePlatform(
        tmp=tmp_path,
        spawn=spawn,
        llm_base_url=llm_peer.base_url,
        provider_url=provider_url,
        tenant=TS_LOOP_TENANT,
        registration={"agentRefs": AGENT_REFS},
    )
    platform.start_tool_pod()
    platform.start_aer()
    platform.write_registrations()
    platform.start_oe(extra={"OE_CLIENT_TOKEN_NAMESPACES": "team-a"})
    child_task = {"mode": "calls", "calls": [["shout", {"text": "deep"}]]}
    llm_peer.push(Turn.calls(("agent__loop", {"input": child_task})), Turn.answer("the child said DEEP"))
    parent = platform.invoke({"mode": "llm", "text": "ask the loop agent to shout deep"})
    view = platform.wait(parent)
    assert view["status"] == "completed", view
    assert view["result"] == {"answer": "the child said DEEP"}
    offered = {tool["function"]["name"]: tool["function"] for tool in llm_peer.requests[0].body["tools"]}
    assert "agent__loop" in offered and offered["agent__loop"]["description"] == "the loop Agent, once"
    assert "shout" in offered and "word_count" in offered, "the tenant's own tools come first, still there"
    assert "DEEP" in json.dumps(llm_peer.requests[1].body["messages"])
