"""Decision 10: canonical dotted tool names, the model-facing names, and the mapping between them."""

from __future__ import annotations

import pytest

from agent_runtime.connectors.builtin.registry import registry
from agent_runtime.llm.messages import (
    MessageError,
    canonical_tool_names,
    offered_tool_names,
    to_openai_messages,
    to_openai_tools,
)
from agent_runtime.toolnames import MODEL_NAME_PATTERN, ToolNameError, ToolNameMap, to_model_name


def test_dots_become_double_underscores_and_valid_names_stay() -> None:
    assert to_model_name("slack.post_message") == "slack__post_message"
    assert to_model_name("gsheets.read_range") == "gsheets__read_range"
    assert to_model_name("jiradc_getComments") == "jiradc_getComments"
    assert to_model_name("word-count") == "word-count"


@pytest.mark.parametrize("name", ["a/b", "x" * 65, "a.b" + "c" * 62, "", "naïve.tool"])
def test_names_with_no_model_form_are_refused(name: str) -> None:
    with pytest.raises(ToolNameError):
        to_model_name(name)


def test_the_map_reverses_only_offered_names() -> None:
    names = ToolNameMap.of(["slack.post_message", "word_count"])
    assert names.model("slack.post_message") == "slack__post_message"
    assert names.canonical("slack__post_message") == "slack.post_message"
    assert names.canonical("word_count") == "word_count"
    assert names.canonical("github__get_issue") == "github__get_issue"  # not offered: unchanged


def test_collisions_are_refused_naming_both() -> None:
    with pytest.raises(ToolNameError, match=r"'a\.b' and 'a__b'"):
        ToolNameMap.of(["a.b", "a__b"])
    ToolNameMap.of(["a.b", "a.b"])  # the same tool twice is not a collision


def test_every_builtin_tool_has_a_model_name_and_none_collide() -> None:
    every = [tool.name for cls in registry().values() for tool in cls.tools]
    names = ToolNameMap.of(every)
    assert all(MODEL_NAME_PATTERN.match(names.model(n)) for n in every)
    assert {names.canonical(names.model(n)) for n in every} == set(every)


def test_llm_wire_uses_model_names_and_maps_answers_back() -> None:
    tools = [{"name": "slack.post_message", "description": "post", "inputSchema": {"type": "object"}}]
    assert to_openai_tools(tools)[0]["function"]["name"] == "slack__post_message"
    history = [
        {"type": "human", "content": "post it"},
        {"type": "ai", "content": "", "tool_calls": [{"id": "c1", "name": "slack.post_message", "args": {}}]},
        {"type": "tool", "content": "ok", "tool_call_id": "c1", "name": "slack.post_message"},
    ]
    wire = to_openai_messages(history)
    assert wire[1]["tool_calls"][0]["function"]["name"] == "slack__post_message"
    answer = {
        "type": "ai",
        "tool_calls": [{"id": "c2", "name": "slack__post_message", "args": {"text": "x"}}],
    }
    assert (
        canonical_tool_names(answer, offered_tool_names(tools))["tool_calls"][0]["name"]
        == "slack.post_message"
    )
    chunk = {
        "type": "llm_chunk",
        "tool_call_chunks": [{"index": 0, "name": "slack__post_message", "args": ""}],
    }
    assert (
        canonical_tool_names(chunk, offered_tool_names(tools))["tool_call_chunks"][0]["name"]
        == "slack.post_message"
    )


def test_colliding_tools_cannot_be_offered() -> None:
    with pytest.raises(MessageError) as caught:
        to_openai_tools([{"name": "slack.post_message"}, {"name": "slack__post_message"}])
    assert caught.value.where == "tools"
