"""The CLI's pure pieces: --input and --edit-args parsing, Agent references, event lines, table cells."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime.cli.errors import CliError
from agent_runtime.cli.executions import agent_ref, parse_input
from agent_runtime.cli.follow import Renderer, describe
from agent_runtime.cli.output import cell
from agent_runtime.cli.reviews import newest_first, parse_args


def test_input_is_json_or_a_file_of_json(tmp_path: Path) -> None:
    assert parse_input(None) == {}
    assert parse_input('{"a": 1}') == {"a": 1}
    (tmp_path / "in.json").write_text('["x"]')
    assert parse_input(f"@{tmp_path / 'in.json'}") == ["x"]
    with pytest.raises(CliError, match="line 1 column 2") as bad:
        parse_input("{oops")
    assert bad.value.exit_code == 2
    with pytest.raises(CliError, match="cannot read"):
        parse_input(f"@{tmp_path / 'missing.json'}")


def test_edit_args_must_be_an_object() -> None:
    assert parse_args(None) is None
    assert parse_args('{"amount": 7}') == {"amount": 7}
    for raw in ("[1]", "7", "nope"):
        with pytest.raises(CliError) as bad:
            parse_args(raw)
        assert bad.value.exit_code == 2


def test_agent_references() -> None:
    assert agent_ref("loop", "team-a") == "team-a/loop"
    assert agent_ref("team-b/other", "team-a") == "team-b/other"
    for bad in ("a/b/c", "/x", "x/"):
        with pytest.raises(CliError, match="NAMESPACE/NAME"):
            agent_ref(bad, "team-a")


def test_event_lines_name_the_route_and_the_cache_and_cells() -> None:
    started = {"seq": 3, "type": "step_started", "step": 1, "data": {"tool": "shout", "route": "tool_pod"}}
    assert describe(started) == "   3 step_started step 1 shout via tool_pod"
    replayed = {"tool": "shout", "status": "success", "from_cache": True}
    assert describe({"seq": 4, "type": "step_finished", "step": 1, "data": replayed}).endswith(
        "shout success (cached)"
    )
    fresh = {"seq": 4, "type": "step_finished", "step": 1, "data": {**replayed, "from_cache": False}}
    assert "cached" not in describe(fresh)
    assert describe({"seq": 5, "type": "completed", "data": {}}) == "   5 completed"
    assert cell(None) == "" and cell(3) == "3"
    assert cell({"k": "v" * 100}).endswith("...") and len(cell({"k": "v" * 100})) == 60
    assert cell({"k": "v" * 100}, width=None) == '{"k":"' + "v" * 100 + '"}'


def test_reviews_of_several_namespaces_newest_first() -> None:
    pages = [
        {"items": [{"execution_id": "a", "waiting_since": "2026-01-01T00:00:01.000Z"}]},
        {"items": [{"execution_id": "b", "waiting_since": "2026-01-01T00:00:02.000Z"}]},
    ]
    assert [item["execution_id"] for item in newest_first(pages, limit=5)] == ["b", "a"]
    assert [item["execution_id"] for item in newest_first(pages, limit=1)] == ["b"]


def test_model_deltas_stream_on_one_line_and_the_next_event_starts_a_new_one() -> None:
    renderer = Renderer()
    written = [
        renderer.feed({"seq": 1, "type": "llm_delta", "step": 1, "data": {"text": "Hel"}}),
        renderer.feed({"seq": 2, "type": "llm_delta", "step": 1, "data": {"text": "lo"}}),
        renderer.feed({"seq": 3, "type": "completed", "data": {}}),
        renderer.close(),
    ]
    assert "".join(written) == "   1 model: Hello\n   3 completed\n"
    assert renderer.feed({"seq": 4, "type": "llm_delta", "data": {"text": "x"}}) == "   4 model: x"
    assert renderer.close() == "\n" and renderer.close() == ""
