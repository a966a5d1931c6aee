"""LangGraph.js stream modes through the Python OE and the TS AER (LG-10): a client's `stream_mode` makes
the AER run the graph with `stream` and send each chunk of those modes to the OE, which publishes it as an
execution event of that mode's name; a mode not asked for is never sent. And the seed's streamed failure: a
turn whose tool call has a platform failure ends with the failure as its error, after the client received
the tools step whose ToolMessage carries the failure text; never `completed`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Process
from tests.integration.langgraph_ts.example_platform import ExamplePlatform, example_platform, sdk_tenant
from tests.integration.loop.harness import CLIENT_TOKEN
from tests.providers.ledger_provider import RunningLedger
from tests.providers.llm_peer import RunningLLMPeer, Turn

pytestmark = pytest.mark.integration


def _platform(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, ledger: RunningLedger
) -> ExamplePlatform:
    env = {
        "CHECKPOINT_STORE": "sqlite",
        "CHECKPOINT_SQLITE_PATH": str(tmp_path / "cp.sqlite3"),
        "FAILURE_AGENT_SAVER": "platform",
    }
    return example_platform(
        tmp_path,
        spawn,
        llm_base_url=llm_peer.base_url,
        refund_url=ledger.url,
        checkpoint_env=env,
        tenant=sdk_tenant("failure_agent"),
    )


def _streamed(platform: ExamplePlatform, text: str, modes: list[str]) -> list[dict[str, Any]]:
    with platform.client() as client:
        body = {
            "agent": "team-a/loop",
            "input": {"messages": [{"role": "user", "content": text}]},
            "stream_mode": modes,
        }
        response = client.post("/invoke", json=body)
    assert response.status_code == 202, response.text
    execution_id = str(response.json()["execution_id"])
    return list(_events(platform, execution_id))


def _events(platform: ExamplePlatform, execution_id: str) -> Iterator[dict[str, Any]]:
    headers = {"authorization": f"Bearer {CLIENT_TOKEN}"}
    with (
        httpx.Client(base_url=platform.oe_url, timeout=60) as client,
        client.stream("GET", f"/execution/{execution_id}/events", headers=headers) as stream,
    ):
        for line in stream.iter_lines():
            if line.startswith("data: "):
                yield json.loads(line.removeprefix("data: "))


def test_the_asked_modes_stream_as_events_and_no_other(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, ledger: RunningLedger
) -> None:
    platform = _platform(tmp_path, spawn, llm_peer, ledger)
    llm_peer.push(Turn.calls(("echo", {"text": "hi"})), Turn.answer("said hi"))
    records = _streamed(platform, "echo hi", ["updates"])
    assert records[-1]["type"] == "completed", records[-1]
    updates = [r["data"]["data"] for r in records if r["type"] == "updates"]
    assert [next(iter(u)) for u in updates] == ["agent", "tools", "agent"], updates
    assert updates[1]["tools"]["messages"][0]["content"] == "hi"
    assert updates[2]["agent"]["messages"][0]["content"] == "said hi"
    assert not any(r["type"] in ("values", "messages", "custom") for r in records)


def test_a_streamed_turn_with_a_platform_failure_ends_failed_after_what_was_sent(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, ledger: RunningLedger
) -> None:
    platform = _platform(tmp_path, spawn, llm_peer, ledger)
    llm_peer.push(Turn.calls(("export_report", {})), Turn.answer("never asked"))
    records = _streamed(platform, "export the report", ["updates"])
    kinds = [r["type"] for r in records if r["type"] in ("updates", "failed", "completed")]
    # The model's step, then the tools step whose ToolMessage carries the failure text, then the error.
    assert kinds == ["updates", "updates", "failed"], kinds
    updates = [r["data"]["data"] for r in records if r["type"] == "updates"]
    assert next(iter(updates[0])) == "agent"
    tool_message = updates[1]["tools"]["messages"][0]
    assert tool_message["status"] == "error"
    assert "platform failure, this turn ends" in tool_message["content"], tool_message
    failed = next(r for r in records if r["type"] == "failed")
    assert failed["data"]["error"]["category"] == "platform_failure"
    assert len(llm_peer.requests) == 1  # the model was not asked after the failure
