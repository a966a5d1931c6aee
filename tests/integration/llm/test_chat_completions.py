"""ChatCompletionsModel against the real loopback LLM peer (OpenAI wire format, no mocks)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.contract import LLM_API_KEY_ENV_ENV, LLM_BASE_URL_ENV, LLM_MODEL_ENV
from agent_runtime.llm import ChatCompletionsModel, LLMError, LLMErrorCategory, MessageError
from tests.conftest import REPO_ROOT, Process, free_port, wait_for_port
from tests.providers.llm_peer import RunningLLMPeer, Turn, running_llm_peer

KEY = "sk-peer-test-key-0123456789"
KEY_ENV = "LLM_PEER_TEST_KEY"
WORD_COUNT = {
    "name": "word_count",
    "description": "Count the words of a text",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}
LOOKUP = {
    "name": "lookup",
    "description": "Look a record up",
    "inputSchema": {"type": "object", "properties": {"id": {"type": "integer"}, "deep": {"type": "boolean"}}},
}
ASK = [
    {"type": "system", "content": "You are terse."},
    {"type": "human", "content": "count these three words"},
]


@pytest.fixture(scope="module")
def peer() -> Iterator[RunningLLMPeer]:
    with running_llm_peer(api_key=KEY) as running:
        yield running


@pytest.fixture(autouse=True)
def _clean(peer: RunningLLMPeer, monkeypatch: pytest.MonkeyPatch) -> None:
    peer.reset()
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as running:
        yield running


@pytest.fixture
def make(peer: RunningLLMPeer, runner: asyncio.Runner) -> Iterator[Callable[..., ChatCompletionsModel]]:
    """Models on the shared peer; each one is closed on the loop that used it."""
    made: list[ChatCompletionsModel] = []

    def _make(**overrides: Any) -> ChatCompletionsModel:
        settings: dict[str, Any] = {"base_url": peer.base_url, "model": "gpt-peer", "api_key_env": KEY_ENV}
        settings.update({"timeout_s": 5.0, **overrides})
        model = ChatCompletionsModel(**settings)
        made.append(model)
        return model

    yield _make
    for model in made:
        runner.run(model.aclose())


@pytest.fixture
def model(make: Callable[..., ChatCompletionsModel]) -> ChatCompletionsModel:
    return make()


def _fail(runner: asyncio.Runner, model: ChatCompletionsModel, **kwargs: Any) -> LLMError:
    with pytest.raises(LLMError) as caught:
        runner.run(model.ainvoke(ASK, **kwargs))
    return caught.value


def _collect(runner: asyncio.Runner, model: ChatCompletionsModel, messages: Any, **kwargs: Any) -> list[dict]:
    async def go() -> list[dict]:
        return [event async for event in model.astream(messages, **kwargs)]

    return runner.run(go())


# Answers --------------------------------------------------------------------------------------------------


def test_text_answer(peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel) -> None:
    peer.push(Turn.answer("Three words, indeed."))
    message = runner.run(model.ainvoke(ASK, temperature=0))
    assert message["type"] == "ai"
    assert message["content"] == "Three words, indeed."
    assert message["id"].startswith("chatcmpl-")
    assert message["name"] is None and message["additional_kwargs"] == {}
    assert message["tool_calls"] == [] and message["invalid_tool_calls"] == []
    metadata = message["response_metadata"]
    assert (metadata["model_name"], metadata["finish_reason"], metadata["system_fingerprint"]) == (
        "gpt-peer",
        "stop",
        "fp_llmpeer01",
    )
    (request,) = peer.requests
    assert (request.method, request.path, request.authorization) == (
        "POST",
        "/v1/chat/completions",
        f"Bearer {KEY}",
    )
    assert request.body == {
        "model": "gpt-peer",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "count these three words"},
        ],
        "temperature": 0,
    }


def test_tool_calls(peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel) -> None:
    peer.push(Turn.calls(("word_count", {"text": "a b c"}), ("lookup", {"id": 7, "deep": True})))
    message = runner.run(model.ainvoke(ASK, tools=[WORD_COUNT, LOOKUP], tool_choice="auto"))
    assert [(c["name"], c["args"]) for c in message["tool_calls"]] == [
        ("word_count", {"text": "a b c"}),
        ("lookup", {"id": 7, "deep": True}),
    ]
    assert all(c["id"].startswith("call_") for c in message["tool_calls"])
    assert message["content"] == ""
    assert message["response_metadata"]["finish_reason"] == "tool_calls"
    sent = peer.requests[0].body
    assert sent["tool_choice"] == "auto"
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["inputSchema"]},
        }
        for t in (WORD_COUNT, LOOKUP)
    ]


@pytest.mark.parametrize(
    "turn",
    [
        Turn.answer("A longer answer, streamed word by word, with punctuation: done."),
        Turn.calls(("word_count", {"text": "héllo wörld"}), ("lookup", {"id": 1})),
        Turn.calls(("lookup", {"id": 2}), text="Checking that for you."),
        Turn(),  # the brain
    ],
    ids=["text", "tool-calls", "text-and-tool-calls", "brain"],
)
def test_streamed_message_equals_the_whole_one_field_for_field(
    peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel, turn: Turn
) -> None:
    peer.push(turn, turn)
    whole = runner.run(model.ainvoke(ASK, tools=[WORD_COUNT, LOOKUP]))
    streamed = runner.run(model.ainvoke(ASK, tools=[WORD_COUNT, LOOKUP], stream=True))
    for key in ("id", "name", "additional_kwargs", "response_metadata", "tool_calls", "usage_metadata"):
        assert streamed[key] == whole[key], key
    assert streamed == whole
    first, second = peer.requests
    assert "stream" not in first.body
    assert second.body["stream"] is True and second.body["stream_options"] == {"include_usage": True}
    assert second.headers["accept"] == "text/event-stream"


def test_tool_call_deltas_are_assembled(
    peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel
) -> None:
    args = {"text": "a rather long text " * 5, "nested": {"list": [1, 2, {"deep": "é"}]}}
    peer.push(Turn.calls(("word_count", args), ("lookup", {"id": 3})))
    events = _collect(runner, model, ASK, tools=[WORD_COUNT, LOOKUP])
    *chunks, final = events
    assert all(e["type"] == "llm_chunk" for e in chunks) and final["type"] == "ai"
    pieces: dict[int, list[str]] = {}
    for event in chunks:
        for piece in event["tool_call_chunks"]:
            pieces.setdefault(piece["index"], []).append(piece["args"])
    assert len(pieces[0]) > 10  # really split across many chunks
    assert json.loads("".join(pieces[0])) == args
    assert [c["args"] for c in final["tool_calls"]] == [args, {"id": 3}]


def test_stream_events_carry_id_and_metadata(
    peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel
) -> None:
    peer.push(Turn.answer("one two three four"))
    *chunks, final = _collect(runner, model, ASK)
    assert len(chunks) >= 6  # role, four words, finish, usage
    assert {e["id"] for e in chunks} == {final["id"]}
    assert all(set(e) >= {"id", "name", "content", "additional_kwargs", "response_metadata"} for e in chunks)
    assert "".join(e["content"] for e in chunks) == final["content"] == "one two three four"
    assert chunks[-1]["usage_metadata"] == final["usage_metadata"]


def test_usage(peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel) -> None:
    peer.push(Turn.answer("four words right here"))
    usage = runner.run(model.ainvoke(ASK))["usage_metadata"]
    # The peer counts one token per message plus one per word, and reports none of the prompt as cached.
    assert usage == {
        "input_tokens": (1 + 3) + (1 + 4),
        "output_tokens": 4,
        "total_tokens": 13,
        "input_token_details": {"cache_read": 0},
    }


def test_the_brain_runs_an_agent_loop(
    peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel
) -> None:
    asked = runner.run(model.ainvoke(ASK, tools=[LOOKUP, WORD_COUNT]))
    (call,) = asked["tool_calls"]
    assert (call["name"], call["args"]) == ("word_count", {"text": "count these three words"})
    result = {"type": "tool", "content": '{"words": 4}', "tool_call_id": call["id"], "name": "word_count"}
    answer = runner.run(model.ainvoke([*ASK, asked, result], tools=[LOOKUP, WORD_COUNT], stream=True))
    assert answer["content"] == 'word_count says: {"words": 4}'
    assert answer["tool_calls"] == []
    assert peer.requests[1].body["messages"][2]["tool_calls"][0]["id"] == call["id"]


def test_one_connection_is_reused_and_aclose_then_reopens(
    peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel
) -> None:
    for _ in range(3):
        runner.run(model.ainvoke(ASK))
    assert len({r.client for r in peer.requests}) == 1
    runner.run(model.aclose())
    runner.run(model.ainvoke(ASK))
    assert peer.requests[-1].client != peer.requests[0].client


def test_invalid_messages_fail_before_any_request(
    peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel
) -> None:
    with pytest.raises(MessageError, match=r"messages\[1\]\.content"):
        runner.run(model.ainvoke([ASK[0], {"type": "human", "content": 5}]))
    assert peer.requests == []


# Failures -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "category"),
    [
        (401, LLMErrorCategory.AUTH),
        (403, LLMErrorCategory.AUTH),
        (429, LLMErrorCategory.RATE_LIMITED),
        (500, LLMErrorCategory.SERVER_ERROR),
        (503, LLMErrorCategory.SERVER_ERROR),
        (400, LLMErrorCategory.CLIENT_ERROR),
        (404, LLMErrorCategory.CLIENT_ERROR),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_http_errors_are_classified(
    peer: RunningLLMPeer,
    runner: asyncio.Runner,
    model: ChatCompletionsModel,
    status: int,
    category: str,
    stream: bool,
) -> None:
    peer.push(Turn.error(status, retry_after=3 if status == 429 else None))
    error = _fail(runner, model, stream=stream)
    assert (error.category, error.status_code) == (category, status)
    assert str(status) in error.explanation
    assert f"code=scripted_{status}" in error.explanation  # the error code, never the message
    assert "Scripted error" not in error.explanation
    assert error.to_call_error().category == category
    if status == 429:
        assert error.retry_after_s == 3 and error.retryable


def test_a_wrong_key_is_an_auth_error(
    peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-not-the-right-one")
    error = _fail(runner, model)
    assert (error.category, error.status_code) == (LLMErrorCategory.AUTH, 401)
    assert KEY_ENV in error.explanation and "invalid_api_key" in error.explanation
    assert not error.retryable


@pytest.mark.parametrize(
    "turn",
    [
        Turn.garbage(),
        Turn.garbage("{not json", content_type="application/json"),
        Turn.garbage('{"object": "list", "data": []}', content_type="application/json"),
        Turn.garbage('{"choices": [{"message": {"content": 5}}]}', content_type="application/json"),
        Turn.garbage("data: {broken\n\n", content_type="text/event-stream"),
        Turn.garbage("<html>hello</html>\n\n", content_type="text/event-stream"),
        Turn.garbage('data: {"choices": "no"}\n\ndata: [DONE]\n\n', content_type="text/event-stream"),
    ],
    ids=["html", "not-json", "wrong-shape", "wrong-field", "sse-not-json", "not-sse", "sse-wrong-shape"],
)
@pytest.mark.parametrize("stream", [False, True])
def test_garbage_is_a_bad_response(
    peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel, turn: Turn, stream: bool
) -> None:
    peer.push(turn)
    assert _fail(runner, model, stream=stream).category == LLMErrorCategory.BAD_RESPONSE


def test_shape_errors_name_the_field(
    peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel
) -> None:
    peer.push(Turn.garbage('{"choices": [{"message": {"content": 5}}]}', content_type="application/json"))
    assert "response.choices[0].message.content" in _fail(runner, model).explanation


def test_an_error_event_inside_a_stream_is_a_server_error(
    peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel
) -> None:
    body = 'data: {"error": {"message": "overloaded", "type": "server_error", "code": "overloaded"}}\n\n'
    peer.push(Turn.garbage(body, content_type="text/event-stream"))
    error = _fail(runner, model, stream=True)
    assert error.category == LLMErrorCategory.SERVER_ERROR
    assert "code=overloaded" in error.explanation


def test_responses_over_the_cap_are_refused(
    peer: RunningLLMPeer, runner: asyncio.Runner, make: Callable[..., ChatCompletionsModel]
) -> None:
    model = make(max_response_bytes=2000)
    peer.push(Turn.answer("word " * 1000), Turn.answer("word " * 1000))
    assert _fail(runner, model).category == LLMErrorCategory.BAD_RESPONSE
    error = _fail(runner, model, stream=True)
    assert error.category == LLMErrorCategory.BAD_RESPONSE and "2000 bytes" in error.explanation


@pytest.mark.parametrize("stream", [False, True])
def test_a_slow_peer_is_a_timeout(
    peer: RunningLLMPeer, runner: asyncio.Runner, make: Callable[..., ChatCompletionsModel], stream: bool
) -> None:
    model = make(timeout_s=0.3)
    peer.push(Turn.slow(5))
    started = time.monotonic()
    error = _fail(runner, model, stream=stream)
    assert error.category == LLMErrorCategory.TIMEOUT and "0.3 s" in error.explanation
    assert time.monotonic() - started < 2


def test_one_budget_covers_a_drip_fed_stream(
    peer: RunningLLMPeer, runner: asyncio.Runner, make: Callable[..., ChatCompletionsModel]
) -> None:
    model = make(timeout_s=0.5)
    # Every chunk comes well within any per-read timeout, but the whole answer does not fit the budget.
    peer.push(
        Turn(text="many small words " * 10, chunk_delay_s=0.1),
        Turn(text="many small words " * 10, chunk_delay_s=0.1),
    )
    assert _fail(runner, model, stream=True).category == LLMErrorCategory.TIMEOUT
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        _collect(runner, model, ASK)
    assert caught.value.category == LLMErrorCategory.TIMEOUT
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("abort", [True, False], ids=["reset", "clean-end"])
def test_a_dropped_stream_is_stream_dropped(
    peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel, abort: bool
) -> None:
    peer.push(Turn.dropped(3, abort=abort, text="this answer never finishes properly"))
    error = _fail(runner, model, stream=True)
    assert error.category == LLMErrorCategory.STREAM_DROPPED and error.retryable
    assert "3 chunks" in error.explanation


def test_astream_yields_what_arrived_before_the_drop(
    peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel
) -> None:
    peer.push(Turn.dropped(3, text="alpha beta gamma delta"))
    seen: list[dict] = []

    async def go() -> None:
        async for event in model.astream(ASK):
            seen.append(event)

    with pytest.raises(LLMError) as caught:
        runner.run(go())
    assert caught.value.category == LLMErrorCategory.STREAM_DROPPED
    assert [e["content"] for e in seen] == ["", "alpha", " beta"]


def test_a_whole_response_cut_short_is_a_connection_error(
    peer: RunningLLMPeer, runner: asyncio.Runner, model: ChatCompletionsModel
) -> None:
    peer.push(Turn.dropped(0, text="cut"))
    error = _fail(runner, model)
    assert error.category == LLMErrorCategory.CONNECTION and "while reading" in error.explanation


def test_nobody_listening_is_a_connection_error(
    runner: asyncio.Runner, make: Callable[..., ChatCompletionsModel]
) -> None:
    model = make(base_url=f"http://127.0.0.1:{free_port()}/v1")
    error = _fail(runner, model)
    assert error.category == LLMErrorCategory.CONNECTION and "before a response" in error.explanation


@pytest.mark.parametrize("value", [None, "", "   "])
def test_a_missing_credential_sends_nothing(
    peer: RunningLLMPeer,
    runner: asyncio.Runner,
    model: ChatCompletionsModel,
    monkeypatch: pytest.MonkeyPatch,
    value: str | None,
) -> None:
    if value is None:
        monkeypatch.delenv(KEY_ENV)
    else:
        monkeypatch.setenv(KEY_ENV, value)
    error = _fail(runner, model)
    assert error.category == LLMErrorCategory.CREDENTIAL_MISSING and KEY_ENV in error.explanation
    assert peer.requests == []


def test_the_key_is_read_per_call(
    peer: RunningLLMPeer,
    runner: asyncio.Runner,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[..., ChatCompletionsModel],
) -> None:
    monkeypatch.delenv(KEY_ENV)
    model = make()  # built before the key exists, as in a Tool Pod starting up
    monkeypatch.setenv(KEY_ENV, KEY)
    assert runner.run(model.ainvoke(ASK))["type"] == "ai"


def test_from_env_calls_the_peer(peer: RunningLLMPeer, runner: asyncio.Runner) -> None:
    env = {LLM_BASE_URL_ENV: peer.base_url, LLM_MODEL_ENV: "gpt-env", LLM_API_KEY_ENV_ENV: KEY_ENV}
    model = ChatCompletionsModel.from_env(env, timeout_s=5)
    try:
        assert runner.run(model.ainvoke(ASK))["response_metadata"]["model_name"] == "gpt-env"
    finally:
        runner.run(model.aclose())
    keyless = ChatCompletionsModel.from_env({LLM_BASE_URL_ENV: peer.base_url, LLM_MODEL_ENV: "gpt-env"})
    try:
        assert _fail(runner, keyless).category == LLMErrorCategory.AUTH
    finally:
        runner.run(keyless.aclose())
    assert peer.requests[-1].authorization is None


# The key never leaks --------------------------------------------------------------------------------------

PLANTED = "sk-PLANTED-7f3a9c2e41d8b6"


def test_the_key_appears_in_no_error_log_or_repr(
    runner: asyncio.Runner, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, PLANTED)
    errors: list[LLMError] = []
    # This peer expects another key, so it answers 401 quoting the planted one, like a careless provider.
    with (
        caplog.at_level(logging.DEBUG),
        running_llm_peer(api_key="sk-expected") as strict,
        running_llm_peer() as lax,
    ):
        lax.push(
            Turn.error(500),  # its message quotes the Authorization header
            Turn.garbage(f"bad key {PLANTED}"),
            Turn.garbage(
                json.dumps({"error": {"message": PLANTED, "type": "x", "code": PLANTED}}),
                content_type="application/json",
            ),
            Turn.garbage(
                f'data: {{"error": {{"message": "{PLANTED}", "type": "auth", "code": "{PLANTED}"}}}}\n\n',
                content_type="text/event-stream",
            ),
            Turn.garbage(f"data: {PLANTED}\n\n", content_type="text/event-stream"),
            Turn.dropped(1, text=f"echo {PLANTED}"),
        )
        models = [
            ChatCompletionsModel(base_url=p.base_url, model="m", api_key_env=KEY_ENV, timeout_s=5)
            for p in (strict, lax)
        ]
        attempts = [(models[0], False), (models[0], True)] + [
            (models[1], s) for s in (False, False, False, True, True, True)
        ]
        for model, stream in attempts:
            with pytest.raises(LLMError) as caught:
                runner.run(model.ainvoke(ASK, stream=stream))
            errors.append(caught.value)
        for model in models:
            runner.run(model.aclose())
        assert all(r.authorization == f"Bearer {PLANTED}" for r in strict.requests + lax.requests)
    assert len(errors) == 8
    assert {e.category for e in errors} >= {
        LLMErrorCategory.AUTH,
        LLMErrorCategory.SERVER_ERROR,
        LLMErrorCategory.BAD_RESPONSE,
    }
    for error in errors:
        texts = [
            str(error),
            repr(error),
            error.explanation,
            "".join(traceback.format_exception(error)),
            error.to_call_error().model_dump_json(),
        ]
        assert not any(PLANTED in text for text in texts), error
    assert caplog.records, "the client and httpx log at DEBUG; the test must see them"
    for record in caplog.records:
        assert PLANTED not in record.getMessage()
        assert PLANTED not in str(record.args)
    assert all(PLANTED not in repr(m) for m in models)


# The peer as a process ------------------------------------------------------------------------------------


def test_the_peer_runs_as_a_process(
    spawn: Callable[..., Process], tmp_path: Path, runner: asyncio.Runner
) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [{"text": "scripted hello"}, {"tool_calls": [{"name": "word_count", "args": {"text": "x"}}]}]
        )
    )
    port = free_port()
    proc = spawn(
        [
            sys.executable,
            "-m",
            "tests.providers.llm_peer",
            "--port",
            str(port),
            "--api-key",
            KEY,
            "--script",
            str(script),
        ],
        cwd=REPO_ROOT,
        name="llm-peer",
    )
    wait_for_port("127.0.0.1", port, proc=proc.popen)
    model = ChatCompletionsModel(
        base_url=f"http://127.0.0.1:{port}/v1", model="m", api_key_env=KEY_ENV, timeout_s=5
    )
    try:
        assert runner.run(model.ainvoke(ASK))["content"] == "scripted hello"
        assert runner.run(model.ainvoke(ASK, stream=True))["tool_calls"][0]["args"] == {"text": "x"}
        assert runner.run(model.ainvoke(ASK, tools=[WORD_COUNT]))["tool_calls"][0]["args"] == {
            "text": "count these three words"
        }
    finally:
        runner.run(model.aclose())
