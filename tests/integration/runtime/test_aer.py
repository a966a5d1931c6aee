"""The launcher in AER mode against a fake OE on loopback: runs, callbacks, HTTP edges, SIGTERM drain."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_runtime.protocol import OE_CALLBACK_PATH, OE_TOOL_EXECUTE_PATH, OE_TOOL_RESULT_PATH
from tests.conftest import Process
from tests.integration.runtime.fake_oe import RunningFakeOE, ai_message, running_fake_oe
from tests.integration.runtime.launched import RUNTIME_TOKEN, Component, launch, new_port, operator_env

APP_ID = "team-a.helper"

TENANT = '''
import asyncio
from typing import Any

from agent_runtime.sdk import App, RequestContext, tool_loop

app = App("aer-test")


@app.tool(is_local=True)
def count_words(text: str) -> dict[str, int]:
    """Count the words in a text."""
    return {"words": len(text.split())}


class Model:
    async def ainvoke(self, messages: Any, **options: Any) -> Any:
        raise AssertionError("the AER never calls the model itself")


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    llm = app.llm(Model())

    async def run(task: dict[str, Any]) -> Any:
        await asyncio.sleep(task.get("sleep", 0))
        if task.get("mode") == "loop":
            answer = await tool_loop(llm, [{"type": "human", "content": task["text"]}], tools=list(ctx.tools))
            return {"answer": answer["content"], "execution": ctx.execution_id}
        if task.get("mode") == "suspend":
            app.suspend("needs a human", {"draft": task.get("text")})
        return {"echo": task, "resume": ctx.resume}

    return run
'''


@pytest.fixture
def oe() -> Iterator[RunningFakeOE]:
    answers = [ai_message(calls=[("c1", "count_words", {"text": "a b c"})]), ai_message("three words")]
    with running_fake_oe(local_tools={"count_words"}, model_answers=answers) as running:
        yield running


def _env(tmp_path: Path, oe_url: str) -> dict[str, str]:
    package = tmp_path / "tenant_aer_test"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "agent.py").write_text(textwrap.dedent(TENANT))
    env = operator_env(tmp_path, mode="aer", port=new_port(), bundle_index=None, oe_url=oe_url)
    env.update(PYTHONPATH=str(tmp_path), AGENT_ENTRYPOINT="tenant_aer_test.agent:app", APP_ID=APP_ID)
    return env


@pytest.fixture
def aer(spawn: Callable[..., Process], tmp_path: Path, oe: RunningFakeOE) -> Component:
    return launch(spawn, _env(tmp_path, oe.url))


def _execute(
    aer: Component, execution_id: str, task: dict[str, object], **fields: object
) -> tuple[int, object]:
    body = {"execution_id": execution_id, "workspace_id": APP_ID, "input": task, **fields}
    with aer.client(timeout=10) as client:
        response = client.post("/execute", json=body)
    return response.status_code, response.json()


def test_a_run_goes_through_the_oe_and_ends_with_a_callback(aer: Component, oe: RunningFakeOE) -> None:
    status, accepted = _execute(aer, "ex-loop", task={"mode": "loop", "text": "count a b c"})
    # Decision 8: the answer names the pod, so the OE can drain exactly this one.
    assert status == 202
    assert accepted == {"execution_id": "ex-loop", "state": "running", "pod_address": aer.url}
    [callback] = oe.wait_for_callbacks(1)
    assert callback == {
        "execution_id": "ex-loop",
        "status": "COMPLETED",
        "result": {"answer": "three words", "execution": "ex-loop"},
        "metadata": None,
        "error": None,
    }
    calls = [(r.body["step"], r.body["tool"]) for r in oe.app.of(OE_TOOL_EXECUTE_PATH)]
    assert calls == [(1, "invoke_llm"), (2, "count_words"), (3, "invoke_llm")]
    first_llm = oe.app.of(OE_TOOL_EXECUTE_PATH)[0].body
    assert first_llm["llm_id"] == "default"
    assert [tool["name"] for tool in first_llm["tools"]] == ["count_words"]
    [result] = [r.body for r in oe.app.of(OE_TOOL_RESULT_PATH)]
    assert (result["step"], result["status"], result["result"]) == (2, "success", {"words": 3})
    assert {r.authorization for r in oe.app.requests} == {f"Bearer {RUNTIME_TOKEN}"}


def test_http_edges(aer: Component, oe: RunningFakeOE) -> None:
    assert _execute(aer, "ex-slow", task={"sleep": 1.5})[0] == 202
    with aer.client(timeout=10) as client:
        assert client.get("/executions/ex-slow").json() == {
            "execution_id": "ex-slow",
            "state": "running",
            "pod_address": aer.url,
        }
        assert client.get("/executions/nobody").status_code == 404
        assert _execute(aer, "ex-slow", task={})[0] == 409
        other = client.post("/execute", json={"execution_id": "ex-other", "workspace_id": "team-b.x"})
        assert other.status_code == 404
        malformed = client.post("/execute", json={"workspace_id": APP_ID, "resume": "maybe"})
        assert malformed.status_code == 400
        assert {p["field"] for p in malformed.json()["detail"]} == {"execution_id", "resume"}
        assert client.post("/execute", content=b"x" * (8 * 1024 * 1024 + 1)).status_code == 413
        tools = client.get("/tools").json()["tools"]
        assert tools == [
            {
                "name": "count_words",
                "description": "Count the words in a text.",
                "inputSchema": tools[0]["inputSchema"],
                "is_local": True,
                "sensitive": False,
                "model_name": "count_words",
            }
        ]
    assert _execute(aer, "ex-suspend", task={"mode": "suspend", "text": "draft 1"})[0] == 202
    assert _execute(aer, "ex-resume", task={}, resume=True)[0] == 202
    callbacks = {c["execution_id"]: c for c in oe.wait_for_callbacks(3)}
    assert callbacks["ex-suspend"]["status"] == "SUSPENDED"
    assert callbacks["ex-suspend"]["metadata"] == {
        "reason": "needs a human",
        "payload": {"draft": "draft 1"},
        "step": 1,  # an agent-level app.suspend is a step of its own, held by the OE
        "tool": "app.suspend",
    }
    assert callbacks["ex-resume"]["result"] == {"echo": {}, "resume": True}
    assert callbacks["ex-slow"]["status"] == "COMPLETED"
    with aer.client(timeout=10) as client:
        assert client.get("/executions/ex-slow").status_code == 404
        metrics = client.get("/metrics").text
    assert 'agent_runtime_executions_finished_total{component="aer",status="SUSPENDED"} 1.0' in metrics


def test_sigterm_waits_for_runs_in_flight(aer: Component, oe: RunningFakeOE) -> None:
    assert _execute(aer, "ex-drain", task={"sleep": 2})[0] == 202
    time.sleep(0.3)
    aer.process.popen.send_signal(signal.SIGTERM)
    assert aer.process.popen.wait(timeout=30) == 0
    [callback] = oe.callbacks()
    assert (callback["execution_id"], callback["status"]) == ("ex-drain", "COMPLETED")
    assert len(oe.app.of(OE_CALLBACK_PATH)) == 1


def test_without_the_oe_url_the_aer_refuses_to_start(tmp_path: Path) -> None:
    env = _env(tmp_path, "http://127.0.0.1:9")
    del env["AGENTIC_OE_URL"]
    result = subprocess.run(
        [sys.executable, "-m", "agent_runtime.launcher"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    [error] = [r for r in map(json.loads, result.stderr.splitlines()) if r["level"] == "ERROR"]
    assert "AGENTIC_OE_URL is not set" in error["message"]
