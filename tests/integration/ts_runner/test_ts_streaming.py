"""A client's `stream: true` through the TypeScript Tool Pod: the OE asks it for NDJSON, it streams the
model's chat-completion chunks as `{"delta": ...}` lines, then the outcome; the client gets `llm_delta`
events whose pieces join into the cached message, and no secret of the Tool Pod survives a cut across
chunks (redacted on a window, not per piece)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from agent_runtime.llm_delta import joined
from agent_runtime.protocol import LLMDelta
from tests.integration.loop.harness import AGENT, CLIENT_TOKEN, LLM_KEY, PLANTED, RUNTIME_TOKEN
from tests.integration.ts_runner.node_platform import NodePlatform
from tests.providers.llm_peer import RunningLLMPeer, Turn


def invoke(platform: NodePlatform, task: Any) -> str:
    with platform.client() as client:
        response = client.post("/invoke", json={"agent": AGENT, "input": task, "stream": True})
    assert response.status_code == 202, response.text
    return str(response.json()["execution_id"])


def events(platform: NodePlatform, execution_id: str) -> Iterator[tuple[dict[str, Any], bytes]]:
    headers = {"authorization": f"Bearer {CLIENT_TOKEN}"}
    with (
        httpx.Client(base_url=platform.oe_url, timeout=30) as client,
        client.stream("GET", f"/execution/{execution_id}/events", headers=headers) as stream,
    ):
        for line in stream.iter_lines():
            if line.startswith("data: "):
                yield json.loads(line.removeprefix("data: ")), line.encode()


def deltas_by_step(records: list[dict[str, Any]]) -> dict[int, list[LLMDelta]]:
    out: dict[int, list[LLMDelta]] = {}
    for record in records:
        if record["type"] == "llm_delta":
            out.setdefault(record["step"], []).append(LLMDelta.model_validate(record["data"]))
    return out


def test_the_models_pieces_stream_as_llm_delta_events(
    platform: NodePlatform, llm_peer: RunningLLMPeer
) -> None:
    words = " ".join(f"word{i}" for i in range(30))
    llm_peer.push(Turn.calls(("shout", {"text": "stream me"})), Turn.answer(words, chunk_delay_s=0.01))
    execution_id = invoke(platform, {"mode": "llm", "text": "hello"})
    records = [record for record, _ in events(platform, execution_id)]
    assert records[-1]["type"] == "completed", records[-1]
    by_step = deltas_by_step(records)
    assert sorted(by_step) == [1, 3]
    for deltas in by_step.values():
        assert [d.index for d in deltas] == list(range(len(deltas)))
        assert [d.last for d in deltas].count(True) == 1 and deltas[-1].last
    assert len(by_step[3]) > 10, "the text came as many deltas, not one"
    assert joined(by_step[3])["text"] == words
    assert joined(by_step[1])["tool_calls"][0]["args"] == {"text": "stream me"}
    assert any(r.body.get("stream") for r in llm_peer.requests), "the Tool Pod asked the model to stream"
    view = records[-1]["data"]
    assert view.get("result", {}).get("answer", words) == words


def test_a_secret_split_across_chunks_appears_in_no_delta(
    platform: NodePlatform, llm_peer: RunningLLMPeer
) -> None:
    # Tool-call arguments stream in 7-character pieces: each planted value is cut across chunks.
    llm_peer.push(
        Turn.calls(("shout", {"text": f"key {LLM_KEY} and token {RUNTIME_TOKEN} end"})),
        Turn.answer("done"),
    )
    execution_id = invoke(platform, {"mode": "llm", "text": "leak"})
    raw = b""
    records = []
    for record, frame in events(platform, execution_id):
        raw += frame
        records.append(record)
    assert records[-1]["type"] == "completed"
    deltas = deltas_by_step(records)[1]
    rebuilt = "".join(d.text + "".join(c.arguments for c in d.tool_calls) for d in deltas)
    for secret in PLANTED:
        assert secret.encode() not in raw
        assert secret not in rebuilt
    assert b"sk-loop-llm-key" not in raw and b"loop-runtime-token" not in raw  # no prefix leaked either
    args = [call["args"]["text"] for call in joined(deltas)["tool_calls"]]
    assert args == ["key [REDACTED] and token [REDACTED] end"]


def test_a_frameworks_custom_chunks_reach_the_client_for_the_modes_it_asked(platform: NodePlatform) -> None:
    with platform.client() as client:
        body = {"agent": AGENT, "input": {"mode": "custom_stream"}, "stream_mode": ["custom"]}
        response = client.post("/invoke", json=body)
    assert response.status_code == 202, response.text
    execution_id = str(response.json()["execution_id"])
    records = [record for record, _ in events(platform, execution_id)]
    assert records[-1]["type"] == "completed", records[-1]
    assert [r["data"]["data"] for r in records if r["type"] == "custom"] == [
        {"progress": 0},
        {"progress": 1},
        {"progress": 2},
    ]
    assert not any(r["type"] == "values" for r in records), "a mode the client did not ask for is never sent"
    view = platform.wait(execution_id)
    assert view["result"] == {"sent": [True, True, True, False]}
