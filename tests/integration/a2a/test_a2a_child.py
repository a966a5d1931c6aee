"""A child Agent call through the OE (issue 38, the first part of agentRef): the Agent's tool `a2a_child.run`
sends an A2A message to the OE's own A2A route for an Agent of the platform, so the child is an execution
of its own, governed by its policy and audited; a hold inside the child is a tool error in the parent
naming the held call, and the child stays held for its own reviewers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import Process
from tests.integration.a2a.child import CHILD_TOOL, child_platform
from tests.integration.loop.harness import AGENT, Platform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, module_spawn: Callable[..., Process]
) -> Iterator[Platform]:
    with running_llm_peer() as llm, running_echo_provider() as provider:
        yield child_platform(
            tmp=tmp_path_factory.mktemp("platform"),
            spawn=module_spawn,
            llm_base_url=llm.base_url,
            provider_url=provider.url,
        )


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"mode": "calls", "calls": [list(pair) for pair in pairs]}


def executions(platform: Platform) -> list[dict[str, Any]]:
    with platform.client() as client:
        return list(client.get("/executions", params={"agent": AGENT}).json()["items"])


def test_a_child_call_is_an_execution_of_its_own_with_its_own_audit(platform: Platform) -> None:
    before = {e["execution_id"] for e in executions(platform)}
    parent = platform.invoke(calls((CHILD_TOOL, {"data": calls(("shout", {"text": "hi"}))})))
    view = platform.wait(parent)
    assert view["status"] == "completed", view
    (answer,) = view["result"]["results"]
    assert json.loads(answer) == {"results": [{"loud": "HI"}]}, answer
    children = [e for e in executions(platform) if e["execution_id"] not in {*before, parent}]
    assert len(children) == 1 and children[0]["status"] == "completed", children
    child_tools = [r["tool"] for r in platform.audit(children[0]["execution_id"]) if r["kind"] == "tool"]
    parent_tools = [r["tool"] for r in platform.audit(parent) if r["kind"] == "tool"]
    assert "shout" in child_tools and "shout" not in parent_tools
    assert CHILD_TOOL in parent_tools


def test_a_hold_inside_the_child_is_a_tool_error_in_the_parent_and_the_child_stays_held(
    platform: Platform,
) -> None:
    before = {e["execution_id"] for e in executions(platform)}
    held = calls(("transfer", {"amount": 3, "to": "eve"}))
    parent = platform.invoke(calls((CHILD_TOOL, {"data": held})))
    view = platform.wait(parent)
    assert view["status"] == "completed", view
    (error,) = view["result"]["results"]
    assert "agent_input_required" in error["text"] and "transfer" in error["text"], error
    (child,) = [e for e in executions(platform) if e["execution_id"] not in {*before, parent}]
    child_view = platform.wait(child["execution_id"])
    assert child_view["status"] == "suspended" and child_view["suspension"]["tool"] == "transfer"
    assert not platform.ledger.exists(), "the child's held call must not have run"
