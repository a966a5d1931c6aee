"""Platform messages <-> the OpenAI chat-completions wire form (pure functions)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from agent_runtime.llm import (
    MessageError,
    ResponseShapeError,
    StreamCollector,
    ai_message,
    ai_message_from_chunks,
    ai_message_from_completion,
    chat_completion_request,
    normalize_messages,
    to_openai_messages,
    to_openai_tools,
)

WORD_COUNT = {
    "name": "word_count",
    "description": "Count words",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}
AI_KEYS = [
    "type",
    "content",
    "id",
    "name",
    "additional_kwargs",
    "response_metadata",
    "tool_calls",
    "invalid_tool_calls",
    "usage_metadata",
]


def _conversation() -> list[dict[str, Any]]:
    return [
        {"type": "system", "content": "be brief"},
        {"type": "human", "content": "count: a b c", "name": "alice"},
        ai_message(id="m1", tool_calls=[{"id": "call_1", "name": "word_count", "args": {"text": "a b c"}}]),
        {"type": "tool", "content": '{"count": 3}', "tool_call_id": "call_1", "name": "word_count"},
        ai_message(content="3 words", id="m2"),
    ]


# Input messages -------------------------------------------------------------------------------------------


def test_platform_messages_pass_through_and_ai_messages_get_every_field() -> None:
    given = [{"type": "human", "content": "hi", "id": "h1"}, {"type": "ai", "content": None}]
    before = copy.deepcopy(given)
    human, ai = normalize_messages(given)
    assert human == {"type": "human", "content": "hi", "id": "h1"}
    assert set(ai) == set(AI_KEYS)
    assert ai["content"] == "" and ai["tool_calls"] == [] and ai["usage_metadata"] is None
    assert given == before  # never mutated


def test_openai_style_input_becomes_platform_messages() -> None:
    converted = normalize_messages(
        [
            {"role": "developer", "content": "rules"},
            {"role": "user", "content": [{"type": "text", "text": "count a b"}], "name": "bob"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "word_count", "arguments": '{"text":"a b"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "2"},
        ]
    )
    assert converted[0] == {"type": "system", "content": "rules"}
    assert converted[1] == {
        "type": "human",
        "content": [{"type": "text", "text": "count a b"}],
        "name": "bob",
    }
    assert converted[2] == ai_message(
        tool_calls=[{"id": "c1", "name": "word_count", "args": {"text": "a b"}}]
    )
    # The tool's name is found on the AI message that asked for it.
    assert converted[3] == {"type": "tool", "content": "2", "tool_call_id": "c1", "name": "word_count"}


def test_to_openai_messages() -> None:
    wire = to_openai_messages(_conversation())
    assert wire == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "count: a b c", "name": "alice"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "word_count", "arguments": '{"text": "a b c"}'},
                }
            ],
        },
        {"role": "tool", "content": '{"count": 3}', "tool_call_id": "call_1"},
        {"role": "assistant", "content": "3 words"},
    ]


def test_platform_to_openai_and_back_keeps_the_conversation() -> None:
    conversation = _conversation()
    back = normalize_messages(to_openai_messages(conversation))
    assert [m["type"] for m in back] == [m["type"] for m in conversation]
    assert back[2]["tool_calls"] == conversation[2]["tool_calls"]
    assert back[3] == conversation[3]
    assert back[4]["content"] == "3 words"


def test_invalid_tool_calls_still_reach_the_wire_so_their_tool_messages_pair_up() -> None:
    bad = ai_message(invalid_tool_calls=[{"id": "c9", "name": "f", "args": "{oops", "error": "not JSON"}])
    (wire,) = to_openai_messages([bad])
    assert wire["tool_calls"] == [
        {"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
    ]
    assert wire["content"] is None


@pytest.mark.parametrize(
    ("messages", "where"),
    [
        ("hello", "messages"),
        ({"type": "human", "content": "x"}, "messages"),
        ([], "messages"),
        ([{"type": "human", "content": "x"}, "text"], "messages[1]"),
        ([{"content": "x"}], "messages[0]"),
        ([{"type": "robot", "content": "x"}], "messages[0].type"),
        ([{"role": "wizard", "content": "x"}], "messages[0].role"),
        ([{"type": "human", "content": 7}], "messages[0].content"),
        ([{"type": "human", "content": [{"text": "no type"}]}], "messages[0].content[0]"),
        ([{"type": "human", "content": "x", "name": 3}], "messages[0].name"),
        ([{"type": "tool", "content": "x"}], "messages[0].tool_call_id"),
        ([{"role": "tool", "content": "x", "tool_call_id": ""}], "messages[0].tool_call_id"),
        (
            [{"type": "ai", "content": "", "tool_calls": [{"id": "c", "name": "f", "args": [1]}]}],
            "messages[0].tool_calls[0].args",
        ),
        (
            [{"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": {}}]}],
            "messages[0].tool_calls[0].id",
        ),
        ([{"type": "ai", "content": "", "tool_calls": {"id": "c"}}], "messages[0].tool_calls"),
        (
            [{"type": "ai", "content": "", "usage_metadata": {"input_tokens": "1"}}],
            "messages[0].usage_metadata.input_tokens",
        ),
        ([{"type": "ai", "content": "", "response_metadata": []}], "messages[0].response_metadata"),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1]"}}],
                }
            ],
            "messages[0].tool_calls[0].function.arguments",
        ),
        (
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]},
            ],
            "messages[1].tool_calls[0].function.name",
        ),
    ],
)
def test_invalid_messages_name_the_index_and_field(messages: Any, where: str) -> None:
    with pytest.raises(MessageError) as caught:
        normalize_messages(messages)
    assert caught.value.where == where
    assert str(caught.value).startswith(f"{where}: ")
    assert isinstance(caught.value, ValueError)


# Tools and the request ------------------------------------------------------------------------------------


def test_tool_schemas_become_functions() -> None:
    openai_form = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    bare = {"name": "ping"}
    assert to_openai_tools([WORD_COUNT, openai_form, bare]) == [
        {
            "type": "function",
            "function": {
                "name": "word_count",
                "description": "Count words",
                "parameters": WORD_COUNT["inputSchema"],
            },
        },
        {
            "type": "function",
            "function": {"name": "lookup", "description": "", "parameters": {"type": "object"}},
        },
        {
            "type": "function",
            "function": {
                "name": "ping",
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]
    assert to_openai_tools(None) == []


@pytest.mark.parametrize(
    ("tools", "where"),
    [
        ({"name": "x"}, "tools"),
        (["x"], "tools[0]"),
        ([{"description": "no name"}], "tools[0].name"),
        ([WORD_COUNT, {"name": "slack/post_message"}], "tools[1].name"),
        ([{"name": "a.b"}, {"name": "a__b"}], "tools"),
        ([{"name": "f", "inputSchema": "object"}], "tools[0].inputSchema"),
        ([{"type": "function", "function": {"name": "a b"}}], "tools[0].function.name"),
        ([{"name": "f", "description": 5}], "tools[0].description"),
    ],
)
def test_invalid_tools_name_the_index_and_field(tools: Any, where: str) -> None:
    with pytest.raises(MessageError) as caught:
        to_openai_tools(tools)
    assert caught.value.where == where


def test_request_body_merges_options_and_asks_streams_for_usage() -> None:
    messages = [{"type": "human", "content": "hi"}]
    whole = chat_completion_request(
        model="m", messages=messages, options={"temperature": 0, "stream_options": {"x": 1}}
    )
    assert whole == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}
    streamed = chat_completion_request(
        model="m", messages=messages, tools=[WORD_COUNT], stream=True, options={"stream_options": {"x": 1}}
    )
    assert streamed["stream"] is True
    assert streamed["stream_options"] == {"x": 1, "include_usage": True}
    assert streamed["tools"][0]["function"]["name"] == "word_count"
    assert "tools" not in chat_completion_request(model="m", messages=messages, tools=[])


@pytest.mark.parametrize("key", ["model", "messages", "tools", "stream"])
def test_options_cannot_replace_what_the_client_sets(key: str) -> None:
    with pytest.raises(MessageError) as caught:
        chat_completion_request(model="m", messages=[{"type": "human", "content": "hi"}], options={key: 1})
    assert caught.value.where == f"options.{key}"


def test_options_must_be_json() -> None:
    with pytest.raises(MessageError, match="options"):
        chat_completion_request(
            model="m", messages=[{"type": "human", "content": "hi"}], options={"seed": object()}
        )


# Responses ------------------------------------------------------------------------------------------------


def _completion(
    *, content: str | None, calls: list[tuple[str, str, str]] = (), finish: str = "stop", **message: Any
) -> dict[str, Any]:
    wire_message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None, **message}
    if calls:
        wire_message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-test",
        "system_fingerprint": "fp_1",
        "service_tier": "default",
        "choices": [{"index": 0, "message": wire_message, "logprobs": None, "finish_reason": finish}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
    }


def _chunks(
    *, content: str | None, calls: list[tuple[str, str, str]] = (), finish: str = "stop", **delta: Any
) -> list[dict[str, Any]]:
    top = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-test",
        "system_fingerprint": "fp_1",
        "service_tier": "default",
        "usage": None,
    }

    def chunk(d: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            **top,
            "choices": [{"index": 0, "delta": d, "logprobs": None, "finish_reason": finish_reason}],
        }

    out = [
        chunk({"role": "assistant", "content": "" if content is not None else None, "refusal": None, **delta})
    ]
    for start in range(0, len(content or ""), 3):
        out.append(chunk({"content": content[start : start + 3]}))
    for index, (call_id, name, arguments) in enumerate(calls):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        for start in range(0, len(arguments), 2):
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {"index": index, "function": {"arguments": arguments[start : start + 2]}}
                        ]
                    }
                )
            )
    out.append(chunk({}, finish))
    out.append(
        {**top, "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}
    )
    return out


def test_a_text_completion_becomes_an_ai_message() -> None:
    message = ai_message_from_completion(_completion(content="Hello!"))
    assert list(message) == AI_KEYS
    assert message == {
        "type": "ai",
        "content": "Hello!",
        "id": "chatcmpl-1",
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {
            "model_name": "gpt-test",
            "system_fingerprint": "fp_1",
            "finish_reason": "stop",
            "service_tier": "default",
            "token_usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
        },
        "tool_calls": [],
        "invalid_tool_calls": [],
        "usage_metadata": {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12},
    }


def test_tool_calls_are_parsed_and_bad_arguments_kept_as_invalid() -> None:
    calls = [("c1", "word_count", '{"text": "a b"}'), ("c2", "ping", ""), ("c3", "oops", '{"text": ')]
    message = ai_message_from_completion(_completion(content=None, calls=calls, finish="tool_calls"))
    assert message["content"] == ""
    assert message["tool_calls"] == [
        {"id": "c1", "name": "word_count", "args": {"text": "a b"}},
        {"id": "c2", "name": "ping", "args": {}},
    ]
    assert message["invalid_tool_calls"] == [
        {"id": "c3", "name": "oops", "args": '{"text": ', "error": "arguments are not a JSON object"}
    ]
    assert message["response_metadata"]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(
    ("content", "calls", "extra"),
    [
        ("The answer is 42, as computed.", [], {}),
        (
            None,
            [("c1", "word_count", json.dumps({"text": "héllo wörld", "n": [1, 2]})), ("c2", "ping", "{}")],
            {},
        ),
        ("Let me check.", [("c1", "word_count", '{"text": "x"}')], {}),
        ("", [], {"refusal": "I can't help with that."}),
        ("ok", [], {"reasoning_content": "think first"}),
    ],
)
def test_chunks_add_up_to_the_same_message_as_the_whole_completion(
    content: str | None, calls: list[tuple[str, str, str]], extra: dict[str, Any]
) -> None:
    finish = "tool_calls" if calls else "stop"
    whole = ai_message_from_completion(_completion(content=content, calls=calls, finish=finish, **extra))
    streamed = ai_message_from_chunks(_chunks(content=content, calls=calls, finish=finish, **extra))
    for key in ("id", "name", "additional_kwargs", "response_metadata"):  # OE-20, field for field
        assert streamed[key] == whole[key], key
    assert streamed == whole
    assert list(streamed) == AI_KEYS


def test_logprobs_are_kept_either_way() -> None:
    token = {"token": "hi", "logprob": -0.1, "bytes": [104, 105], "top_logprobs": []}
    body = _completion(content="hi")
    body["choices"][0]["logprobs"] = {"content": [token, token], "refusal": None}
    chunks = _chunks(content="hi")
    chunks[1]["choices"][0]["logprobs"] = {"content": [token]}
    chunks[2]["choices"][0]["logprobs"] = {"content": [token]}
    assert ai_message_from_chunks(chunks) == ai_message_from_completion(body)
    assert ai_message_from_completion(body)["response_metadata"]["logprobs"] == {
        "content": [token, token],
        "refusal": None,
    }


def test_stream_events_carry_the_message_metadata() -> None:
    collector = StreamCollector()
    events = [collector.add(chunk) for chunk in _chunks(content="abcdef", calls=[("c1", "f", '{"a": 1}')])]
    assert all(e["type"] == "llm_chunk" and e["id"] == "chatcmpl-1" and e["name"] is None for e in events)
    assert all("additional_kwargs" in e and "response_metadata" in e for e in events)
    assert "".join(e["content"] for e in events) == "abcdef"
    pieces = [c["args"] for e in events for c in e["tool_call_chunks"]]
    assert "".join(pieces) == '{"a": 1}' and len(pieces) > 2
    assert events[-2]["response_metadata"]["finish_reason"] == "stop"
    assert events[-1]["usage_metadata"] == {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12}
    assert collector.message()["tool_calls"] == [{"id": "c1", "name": "f", "args": {"a": 1}}]


def test_tool_call_deltas_without_index_or_with_repeated_ids_assemble() -> None:
    def chunk(delta: dict[str, Any]) -> dict[str, Any]:
        return {"id": "x", "model": "m", "choices": [{"index": 0, "delta": delta}]}

    chunks = [
        chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": '{"k"'}}]}),
        chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": ": 1}"}}]}),
        chunk({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{}"}}]}),
    ]
    message = ai_message_from_chunks(chunks)
    assert message["tool_calls"] == [
        {"id": "a", "name": "f", "args": {"k": 1}},
        {"id": "b", "name": "g", "args": {}},
    ]
    assert message["usage_metadata"] is None


SECRET = "sk-never-quote-this-0123456789"


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ([SECRET], "response"),
        ({"error": SECRET}, "response.choices"),
        ({"choices": []}, "response.choices"),
        ({"choices": SECRET}, "response.choices"),
        ({"choices": [{"index": 1, "message": {}}]}, "response.choices"),
        ({"choices": [{"message": SECRET}]}, "response.choices[0].message"),
        ({"choices": [{"message": {"content": 5}}]}, "response.choices[0].message.content"),
        (
            {"choices": [{"message": {"tool_calls": [{"id": "c"}]}}]},
            "response.choices[0].message.tool_calls[0].function",
        ),
        (
            {
                "choices": [
                    {"message": {"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}]}}
                ]
            },
            "response.choices[0].message.tool_calls[0].function.arguments",
        ),
        ({"choices": [{"message": {"content": "x"}, "finish_reason": 3}]}, "response.finish_reason"),
        (
            {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": SECRET}},
            "response.usage.prompt_tokens",
        ),
        ({"id": 5, "choices": [{"message": {"content": "x"}}]}, "response.id"),
    ],
)
def test_malformed_completions_name_the_field_but_never_a_value(body: Any, where: str) -> None:
    with pytest.raises(ResponseShapeError) as caught:
        ai_message_from_completion(body)
    assert caught.value.where == where
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("chunks", "where"),
    [
        ([SECRET], "chunk[0]"),
        ([{"choices": [{"delta": {"content": 1}}]}], "chunk[0].choices[0].delta.content"),
        (
            [{"choices": []}, {"choices": [{"delta": {"tool_calls": [{"index": "0"}]}}]}],
            "chunk[1].choices[0].delta.tool_calls[0].index",
        ),
        (
            [{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]}],
            "stream.tool_calls[0]",
        ),
        ([{"choices": [], "usage": {"completion_tokens": SECRET}}], "chunk[0].usage.completion_tokens"),
    ],
)
def test_malformed_chunks_name_the_field(chunks: list[Any], where: str) -> None:
    with pytest.raises(ResponseShapeError) as caught:
        ai_message_from_chunks(chunks)
    assert caught.value.where == where
    assert SECRET not in str(caught.value)
