"""The offline model stand-in: turns in order from the script, then the brain; a bad script is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_runtime.devloop.scripted_model import ScriptedModel, ScriptError, load_script

pytestmark = pytest.mark.unit

REQUEST = {
    "model": "scripted",
    "messages": [{"role": "user", "content": "hello there"}],
    "tools": [
        {
            "type": "function",
            "function": {"name": "say", "parameters": {"properties": {"t": {"type": "string"}}}},
        }
    ],
}


def test_the_script_answers_first_then_the_brain(tmp_path: Path) -> None:
    script = tmp_path / "turns.yaml"
    script.write_text("- text: scripted answer\n- tool_calls: [{name: say, args: {t: x}}]\n")
    model = ScriptedModel(load_script(script))
    assert model.complete(REQUEST).whole()["choices"][0]["message"]["content"] == "scripted answer"
    second = model.complete(REQUEST).whole()["choices"][0]
    assert second["finish_reason"] == "tool_calls"
    assert second["message"]["tool_calls"][0]["function"] == {"name": "say", "arguments": '{"t": "x"}'}
    brain = model.complete(REQUEST).whole()["choices"][0]["message"]["tool_calls"][0]["function"]
    assert json.loads(brain["arguments"]) == {"t": "hello there"}


def test_a_stream_carries_the_same_answer() -> None:
    completion = ScriptedModel().complete({**REQUEST, "tools": None})
    chunks = completion.chunks(include_usage=True)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == completion.whole()["choices"][0]["message"]["content"] == "heard: hello there"
    assert chunks[-1]["usage"] == completion.usage


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not JSON or YAML"),
        ('{"text": "x"}', "expected a list of turns"),
        ('[{"say": "x"}]', "turn 0: say"),
    ],
)
def test_a_bad_script_is_named(tmp_path: Path, content: str, problem: str) -> None:
    script = tmp_path / "turns.json"
    script.write_text(content)
    with pytest.raises(ScriptError, match=problem):
        load_script(script)
    with pytest.raises(ScriptError, match="cannot read the script"):
        load_script(tmp_path / "missing.json")
