"""Platform failure versus tool failure in the LangGraph.js SDK (LG-08, LG-09), through the Python OE and
the TS AER and Tool Pod. A tool's own failure reaches the model as a ToolMessage and the turn goes on. A
platform failure (the OE refuses a local tool's result: HTTP 413, the body already ran) ends the turn
FAILED: the next model call is never made, nothing of the step is saved by app.checkpointer(), and the
session's next turn never shows the failure to the model (its unanswered call is told it was stopped).
With a plain MemorySaver of the graph's own the turn fails the same, but that saver kept the step, so the
next turn's model reads the failure text: the seed's documented difference."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Process
from tests.integration.langgraph_ts.example_platform import ExamplePlatform, example_platform, sdk_tenant
from tests.providers.ledger_provider import RunningLedger
from tests.providers.llm_peer import RunningLLMPeer, Turn

pytestmark = pytest.mark.integration

TOOL_FAILURE = "order index rebuilding"
STOPPED = "this tool call was stopped before it finished; its outcome is unknown"
PLATFORM_MARKS = ("platform failure", "413", "larger than")


def _invoke(platform: ExamplePlatform, text: str) -> str:
    with platform.client() as client:
        response = client.post(
            "/invoke",
            json={
                "agent": "team-a/loop",
                "session_id": "support-42",
                "input": {"messages": [{"role": "user", "content": text}]},
            },
        )
    assert response.status_code == 202, response.text
    return str(response.json()["execution_id"])


def _sent(request: Any) -> str:
    return json.dumps(request.body["messages"])


def _first_turn(platform: ExamplePlatform, llm_peer: RunningLLMPeer) -> dict[str, Any]:
    llm_peer.push(
        Turn.calls(("flaky_lookup", {"order": "A1"})),
        Turn.calls(("export_report", {})),
        Turn.answer("never asked"),
    )
    execution_id = _invoke(platform, "look A1 up and export the report")
    return platform.wait(execution_id, "completed", "failed", timeout=60)


@pytest.mark.parametrize("saver", ["platform", "memory"])
def test_a_platform_failure_ends_the_turn_and_only_the_platform_checkpointer_keeps_it_from_the_model(
    saver: str,
    tmp_path: Path,
    spawn: Callable[..., Process],
    llm_peer: RunningLLMPeer,
    ledger: RunningLedger,
) -> None:
    checkpoint_env = {
        "CHECKPOINT_STORE": "sqlite",
        "CHECKPOINT_SQLITE_PATH": str(tmp_path / "cp.sqlite3"),
        "FAILURE_AGENT_SAVER": saver,
    }
    platform = example_platform(
        tmp_path,
        spawn,
        llm_base_url=llm_peer.base_url,
        refund_url=ledger.url,
        checkpoint_env=checkpoint_env,
        tenant=sdk_tenant("failure_agent"),
    )
    view = _first_turn(platform, llm_peer)
    # The turn whose last step was the failed call fails, whichever saver (LG-08).
    assert view["status"] == "failed", view
    assert view["error"]["category"] == "platform_failure", view["error"]
    # The tool's own failure reached the model; the next model call after the platform failure was refused.
    assert len(llm_peer.requests) == 2
    assert TOOL_FAILURE in _sent(llm_peer.requests[1])
    assert not any(mark in _sent(r) for r in llm_peer.requests for mark in PLATFORM_MARKS)

    llm_peer.push(Turn.answer("Sorry about that."))
    second = platform.wait(_invoke(platform, "so, is it done?"), "completed", "failed", timeout=60)
    assert second["status"] == "completed", second
    assert len(llm_peer.requests) == 3
    sent = llm_peer.requests[2].body["messages"]
    text = json.dumps(sent)
    assert TOOL_FAILURE in text  # the tool failure is part of the conversation, in both cases
    if saver == "platform":
        # Nothing of the failing step was saved: the model is told the call stopped, never the failure.
        assert not any(mark in text for mark in PLATFORM_MARKS), text
        assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "tool", "user"]
        assert sent[4]["content"] == STOPPED
    else:
        # A saver of the graph's own kept the step: the next turn's model reads the failure (documented).
        assert "platform failure" in text
