"""`agentengine dev examples/langgraph-agent` in a pseudo-terminal: the LangGraph graph runs in the AER with
its checkpoints in the dev loop's own directory, its model call goes through the OE to the Tool Pod."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from agent_runtime.devloop.children import free_port
from tests.conftest import REPO_ROOT
from tests.integration.devloop.session import DevSession

pytestmark = pytest.mark.integration

EXAMPLE = REPO_ROOT / "examples" / "langgraph-agent"
TEXT = "the graph counts these words"


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevSession]:
    script = tmp_path_factory.mktemp("script") / "turns.yaml"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "word_count", "args": {"text": TEXT}}]},
                {"text": "Five words."},
            ]
        )
    )
    session = DevSession.start(EXAMPLE, "--model", f"scripted:{script}", port=free_port())
    yield session
    session.close()


def test_the_graph_answers_through_the_platform(dev: DevSession) -> None:
    payload = json.dumps({"messages": [{"role": "user", "content": f"count: {TEXT}"}]})
    result = dev.cli("invoke", dev.agent, "-i", payload, "--follow")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "word_count" in result.stdout
    execution_id = result.stdout.split()[1]
    view = dev.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    messages = view["result"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    assert json.loads(messages[2]["content"]) == {"words": 5, "characters": len(TEXT)}
    assert messages[-1]["content"] == "Five words."
    # The graph's checkpoints live in the dev loop's directory, which Ctrl-C removes.
    assert (dev.workdir / "checkpoints.sqlite3").is_file()
    output, _ = dev.interrupt()
    assert "stopped: no process and no directory left behind" in output
    assert not dev.workdir.exists()
