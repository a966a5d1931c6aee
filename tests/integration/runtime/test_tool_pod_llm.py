"""The launcher in tool mode: `/invoke_llm` with a real chat-completions client against the loopback LLM
peer, start-up construction (B-11), and suspension out of band on `/execute` (OE-14)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Process
from tests.integration.runtime.launched import Component, launch, new_port, operator_env
from tests.providers.llm_peer import RunningLLMPeer, Turn, running_llm_peer

LLM_KEY = "sk-peer-key-6d1e0f"  # a test value; the tests check it never leaks
POD_NAME = "helper-tool-5d8c7-x2k4q"

TENANT = '''
import os
from typing import Any

from agent_runtime.llm import ChatCompletionsModel
from agent_runtime.sdk import App, RequestContext

app = App("tool-pod-llm")


@app.tool
def review(amount: int) -> None:
    """Ask a human to approve a payment."""
    app.suspend("approve the payment", {"amount": amount})


@app.tool
def looks_suspended() -> dict[str, str]:
    """Return data that merely looks like a suspension."""
    return {"status": "suspend", "reason": "just data"}


class FixedModel:
    """A tenant model class that answers without any network."""

    async def ainvoke(self, messages: list[dict[str, Any]], *, tools: Any = None, stream: bool = False,
                      **options: Any) -> dict[str, Any]:
        content = f"{len(messages)} message(s), stream={stream}, options={sorted(options)}"
        return {
            "type": "ai", "content": content, "id": "fixed-1", "name": None,
            "additional_kwargs": {}, "response_metadata": {},
            "tool_calls": [], "usage_metadata": {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8},
        }


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    if os.environ.get("TENANT_FAIL_CONSTRUCTION"):
        raise ConnectionError("the start-up dependency is down")
    app.llm(ChatCompletionsModel.from_env(os.environ))
    app.llm(FixedModel(), llm_id="fixed")

    async def run(task: Any) -> Any:
        raise AssertionError("the Tool Pod never runs a business turn")

    return run
'''


@pytest.fixture
def peer() -> Iterator[RunningLLMPeer]:
    with running_llm_peer(api_key=LLM_KEY) as running:
        yield running


def _tool_pod(
    spawn: Callable[..., Process], tmp_path: Path, *, peer: RunningLLMPeer, **extra: str
) -> Component:
    package = tmp_path / "tenant_tool_pod_llm"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "agent.py").write_text(textwrap.dedent(TENANT))
    env = operator_env(tmp_path, mode="tool", port=new_port(), bundle_index=None)
    env.update(
        PYTHONPATH=str(tmp_path),
        AGENT_ENTRYPOINT="tenant_tool_pod_llm.agent:app",
        HOSTNAME=POD_NAME,
        AGENTIC_LLM_BASE_URL=peer.base_url,
        AGENTIC_LLM_MODEL="peer-model",
        AGENTIC_LLM_API_KEY_ENV="TENANT_LLM_KEY",
        TENANT_LLM_KEY=LLM_KEY,
        **extra,
    )
    return launch(spawn, env)


def _records(component: Component) -> list[dict[str, object]]:
    return [json.loads(line) for line in component.process.output().splitlines() if line.strip()]


def test_invoke_llm_runs_the_models_the_entrypoint_registered(
    spawn: Callable[..., Process], tmp_path: Path, peer: RunningLLMPeer
) -> None:
    pod = _tool_pod(spawn, tmp_path, peer=peer)
    messages = [{"type": "system", "content": "be brief"}, {"type": "human", "content": "hello"}]
    peer.push(Turn.answer("hello from the peer"), Turn.error(401))
    with pod.client(timeout=30) as client:
        steps = iter(range(1, 100))

        def invoke(**body: object) -> dict[str, object]:
            # A new step each time: the same (execution, step) is answered from the Tool Pod's memory.
            call = {"messages": messages, "execution_id": "ex", "step": next(steps), **body}
            response = client.post("/invoke_llm", json=call)
            assert response.status_code == 200
            return response.json()

        answer = invoke(llm_id="default")
        assert (answer["status"], answer["error"], answer["pod_name"]) == ("success", None, POD_NAME)
        message = answer["result"]
        assert (message["type"], message["content"], message["tool_calls"]) == (
            "ai",
            "hello from the peer",
            [],
        )
        assert {"id", "name", "additional_kwargs", "response_metadata", "usage_metadata"} <= set(message)
        assert peer.requests[0].authorization == f"Bearer {LLM_KEY}"

        refused = invoke(llm_id="default")
        assert refused["status"] == "error" and refused["error"]["category"] == "auth"

        fixed = invoke(llm_id="fixed", stream=True, options={"temperature": 0})
        assert fixed["result"]["content"] == "2 message(s), stream=True, options=['temperature']"

        unknown = invoke(llm_id="nope")
        assert (
            unknown["error"]["category"] == "unknown_llm"
            and "registered: default, fixed" in unknown["error"]["explanation"]
        )
        malformed = client.post("/invoke_llm", json={"llm_id": "default", "messages": []})
        assert malformed.status_code == 422
        assert malformed.json()["detail"][0]["field"] == "messages"

        suspended = client.post("/execute", json={"tool": "review", "arguments": {"amount": 12}}).json()
        assert (suspended["status"], suspended["result"], suspended["error"], suspended["pod_name"]) == (
            "suspend",
            {"reason": "approve the payment", "payload": {"amount": 12}},
            None,
            POD_NAME,
        )
        data = client.post("/execute", json={"tool": "looks_suspended"}).json()
        assert (data["status"], data["result"]) == ("success", {"status": "suspend", "reason": "just data"})
        metrics = client.get("/metrics").text
    assert 'agent_runtime_llm_calls_total{component="tool",llm_id="default",status="success"} 1.0' in metrics
    assert 'agent_runtime_llm_tokens_total{component="tool",kind="output",llm_id="fixed"} 5.0' in metrics
    assert pod.process.stop() == 0
    output = pod.process.output()
    assert LLM_KEY not in output and LLM_KEY not in json.dumps(refused)
    built = [r for r in _records(pod) if str(r["message"]).startswith("entrypoint built")]
    assert [r["message"] for r in built] == ["entrypoint built: model(s) default, fixed"]


def test_a_failed_construction_warns_and_the_tool_pod_keeps_serving(
    spawn: Callable[..., Process], tmp_path: Path, peer: RunningLLMPeer
) -> None:
    pod = _tool_pod(spawn, tmp_path, peer=peer, TENANT_FAIL_CONSTRUCTION="1")
    with pod.client(timeout=30) as client:
        assert client.post("/execute", json={"tool": "looks_suspended"}).json()["status"] == "success"
        answer = client.post(
            "/invoke_llm", json={"llm_id": "default", "messages": [{"type": "human", "content": "x"}]}
        )
        error = answer.json()["error"]
        assert error["category"] == "unknown_llm" and "could not be built" in error["explanation"]
    assert pod.process.stop() == 0
    warnings = [
        r for r in _records(pod) if r["level"] == "WARNING" and "building the entrypoint" in str(r["message"])
    ]
    assert len(warnings) == 2  # at start-up, and again when the model call retried it
    assert "ConnectionError" in str(warnings[0]["message"])
    assert not [r for r in _records(pod) if r["level"] == "ERROR"]
    assert peer.requests == []
