"""The LLM peer speaks OpenAI's wire format exactly (checked with a plain HTTP client)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.providers.llm_peer import RunningLLMPeer, Turn, brain, running_llm_peer, start_llm_peer

KEY = "sk-peer-wire-key"
AUTH = {"authorization": f"Bearer {KEY}"}
BODY = {"model": "gpt-wire", "messages": [{"role": "user", "content": "hi there"}]}


@pytest.fixture(scope="module")
def peer() -> Iterator[RunningLLMPeer]:
    with running_llm_peer(api_key=KEY) as running:
        yield running


@pytest.fixture
def client(peer: RunningLLMPeer) -> Iterator[httpx.Client]:
    peer.reset()
    with httpx.Client(base_url=peer.base_url, timeout=5) as http:
        yield http


def _events(response: httpx.Response) -> list[str]:
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.endswith("\n\n")
    blocks = response.text.split("\n\n")[:-1]
    assert all(block.startswith("data: ") and "\n" not in block for block in blocks)
    return [block.removeprefix("data: ") for block in blocks]


def test_a_whole_completion(client: httpx.Client, peer: RunningLLMPeer) -> None:
    peer.push(Turn.answer("hello back"))
    body = client.post("/chat/completions", json=BODY, headers=AUTH).json()
    assert set(body) == {
        "id",
        "object",
        "created",
        "model",
        "choices",
        "usage",
        "service_tier",
        "system_fingerprint",
    }
    assert body["object"] == "chat.completion" and body["model"] == "gpt-wire"
    assert body["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hello back", "refusal": None, "annotations": []},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    assert (
        body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    )


def test_a_streamed_tool_call_in_openai_chunks(client: httpx.Client, peer: RunningLLMPeer) -> None:
    peer.push(Turn.calls(("lookup", {"id": 12345, "name": "a long name"})))
    request = {**BODY, "stream": True, "stream_options": {"include_usage": True}}
    *data, done = _events(client.post("/chat/completions", json=request, headers=AUTH))
    assert done == "[DONE]"
    chunks = [json.loads(d) for d in data]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    first = chunks[0]["choices"][0]["delta"]
    assert first == {"role": "assistant", "content": None, "refusal": None}
    head = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
    assert head["index"] == 0 and head["type"] == "function" and head["id"].startswith("call_")
    assert head["function"] == {"name": "lookup", "arguments": ""}
    pieces = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks[2:-2]]
    assert all(set(p) == {"index", "function"} for p in pieces) and len(pieces) > 3
    assert json.loads("".join(p["function"]["arguments"] for p in pieces)) == {
        "id": 12345,
        "name": "a long name",
    }
    assert chunks[-2]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "tool_calls",
    }
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_without_include_usage_no_usage_field(client: httpx.Client, peer: RunningLLMPeer) -> None:
    peer.push(Turn.answer("short"))
    *data, _ = _events(client.post("/chat/completions", json={**BODY, "stream": True}, headers=AUTH))
    assert all("usage" not in json.loads(d) for d in data)


def test_auth_and_request_errors_in_openai_shape(client: httpx.Client, peer: RunningLLMPeer) -> None:
    denied = client.post("/chat/completions", json=BODY, headers={"authorization": "Bearer sk-wrong"})
    assert denied.status_code == 401
    assert set(denied.json()["error"]) == {"message", "type", "param", "code"}
    assert denied.json()["error"]["code"] == "invalid_api_key"
    assert "sk-wrong" in denied.json()["error"]["message"]  # a careless provider, on purpose
    assert client.post("/chat/completions", json=BODY).status_code == 401
    assert client.post("/chat/completions", json={"model": "m"}, headers=AUTH).status_code == 400
    assert client.post("/chat/completions", content=b"{", headers=AUTH).status_code == 400
    assert client.get("/nothing", headers=AUTH).status_code == 404
    assert client.get("/models", headers=AUTH).json()["object"] == "list"
    assert peer.pending == 0  # errors before a turn is taken leave the script alone
    assert [r.path for r in peer.requests][:2] == ["/v1/chat/completions", "/v1/chat/completions"]
    assert peer.requests[0].authorization == "Bearer sk-wrong" and peer.requests[1].authorization is None


def test_scripted_errors_and_retry_after(client: httpx.Client, peer: RunningLLMPeer) -> None:
    peer.push(Turn.error(429, retry_after=7), {"status": 503})
    limited = client.post("/chat/completions", json=BODY, headers=AUTH)
    assert (limited.status_code, limited.headers["retry-after"]) == (429, "7")
    assert limited.json()["error"]["type"] == "rate_limit_exceeded"
    assert client.post("/chat/completions", json=BODY, headers=AUTH).status_code == 503


def test_a_delay_ends_early_when_the_client_leaves(client: httpx.Client, peer: RunningLLMPeer) -> None:
    peer.push(Turn.slow(30))
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        client.post("/chat/completions", json=BODY, headers=AUTH, timeout=0.2)
    assert time.monotonic() - started < 2
    assert client.post("/chat/completions", json=BODY, headers=AUTH).status_code == 200


def test_a_drop_is_quiet_in_the_peer_log(
    client: httpx.Client, peer: RunningLLMPeer, caplog: pytest.LogCaptureFixture
) -> None:
    peer.push(Turn.dropped(2))
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/chat/completions", json={**BODY, "stream": True}, headers=AUTH)
    assert not [r for r in caplog.records if r.name.startswith("uvicorn")]


def test_the_peer_listens_on_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback"):
        start_llm_peer(host="0.0.0.0")


@pytest.mark.parametrize(
    ("messages", "tools", "expected"),
    [
        ([{"role": "user", "content": "hi"}], None, ("peer heard: hi", [])),
        (
            [{"role": "user", "content": "count me"}],
            [
                {
                    "type": "function",
                    "function": {"name": "two", "parameters": {"properties": {"a": {}, "b": {}}}},
                },
                {
                    "type": "function",
                    "function": {"name": "num", "parameters": {"properties": {"n": {"type": "integer"}}}},
                },
                {
                    "type": "function",
                    "function": {"name": "wc", "parameters": {"properties": {"t": {"type": "string"}}}},
                },
            ],
            ("", [("wc", {"t": "count me"})]),
        ),
        (
            [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                        {"id": "2", "type": "function", "function": {"name": "b", "arguments": "{}"}},
                    ],
                },
                {"role": "tool", "tool_call_id": "1", "content": "one"},
                {"role": "tool", "tool_call_id": "2", "content": '{"n": 2}'},
            ],
            None,
            ('a says: one; b says: {"n": 2}', []),
        ),
    ],
)
def test_the_brain(messages: list[dict[str, Any]], tools: Any, expected: tuple[str, list]) -> None:
    text, calls = brain(messages, tools)
    assert (text, [(c.name, c.args) for c in calls]) == expected
