"""The product's main job with the shipped example: examples/echo-agent, a model using tools, governed."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_runtime.connectors import (
    build_bundle,
    load_tool_defs,
    load_tool_yaml,
    materialize_connector,
    write_bundle,
)
from tests.conftest import REPO_ROOT, Process, free_port, wait_for_port
from tests.integration.loop.harness import Platform, Tenant
from tests.providers.llm_peer import RunningLLMPeer, Turn

EXAMPLE = REPO_ROOT / "examples" / "echo-agent"
PROVIDER_TOKEN = "example-provider-token-e2e-91"
SIGNING_KEY = "example-signing-key-e2e-37"


def _example_bundle(directory: Path, provider_url: str) -> Path:
    """The example's own connector files, bound to where this test's provider listens."""
    tool = load_tool_yaml(EXAMPLE / "connectors" / "echo" / "tool.yaml")
    tool = tool.model_copy(update={"source": tool.source.model_copy(update={"base_url": provider_url})})
    catalog = load_tool_defs(EXAMPLE / "connectors" / "echo" / "tool_defs.yaml")
    return write_bundle(build_bundle([materialize_connector(tool, catalog)]), directory)


@pytest.fixture
def example_provider(spawn: Callable[..., Process]) -> Iterator[str]:
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(EXAMPLE),
        "ECHO_PROVIDER_TOKEN": PROVIDER_TOKEN,
    }
    proc = spawn([sys.executable, "-m", "echo_agent.provider", "--port", str(port)], env=env, name="provider")
    wait_for_port("127.0.0.1", port, proc=proc.popen)
    yield f"http://127.0.0.1:{port}"


def test_the_echo_agent_answers_with_tools_and_waits_for_approval_to_sign(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, example_provider: str
) -> None:
    tenant = Tenant(
        entrypoint="echo_agent.agent:app",
        pythonpath=EXAMPLE,
        bundle=_example_bundle,
        tool_env={"ECHO_TOKEN": PROVIDER_TOKEN, "ECHO_SIGNING_KEY": SIGNING_KEY},
    )
    platform = Platform(
        tmp=tmp_path,
        spawn=spawn,
        llm_base_url=llm_peer.base_url,
        provider_url=example_provider,
        tenant=tenant,
    ).start()
    llm_peer.push(
        Turn.calls(("word_count", {"text": "hello brave new world"}), ("echo_getEcho", {"word": "hello"})),
        Turn.calls(("sign_message", {"message": "hello brave new world"})),
        Turn.answer("4 words, echoed, and signed."),
    )
    execution_id = platform.invoke({"text": "count, echo and sign: hello brave new world"})
    view = platform.wait(execution_id)
    assert view["status"] == "suspended", view
    assert view["suspension"]["tool"] == "sign_message"
    assert view["suspension"]["args"] == {"message": "hello brave new world"}
    with platform.client() as client:
        response = client.post(
            f"/api/v1/projects/team-a/executions/{execution_id}/resume", json={"decision": "approved"}
        )
        assert response.status_code == 202, response.text
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    assert view["result"] == {"answer": "4 words, echoed, and signed."}
    # Resumed from the start: the first two model calls and both tools came from the replay cache.
    assert len(llm_peer.requests) == 3
    last = llm_peer.requests[-1].body["messages"]
    tool_results = [json.loads(m["content"]) for m in last if m["role"] == "tool"]
    assert tool_results[0] == {"words": 4, "characters": 21}
    assert tool_results[1]["body"]["word"] == "hello"
    assert len(tool_results[2]["signature"]) == 64
    assert SIGNING_KEY not in platform.outputs() and PROVIDER_TOKEN not in platform.outputs()
