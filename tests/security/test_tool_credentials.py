"""Each credential only where it is used (issue 36): a tenant tool body in the launched Tool Pod tries
every channel it has (environment, /proc/self/environ, the Tool Pod's /proc/<pid>/environ and mem,
ptrace, every process's environ, gc, module globals) for the connector's key, the LLM key and another
tool's secret, and finds none of them; it does see the one secret it declares."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, Process
from tests.integration.runtime.launched import (
    CONNECTOR_SECRET,
    Component,
    launch,
    new_port,
    operator_env,
    write_provider_bundle,
)
from tests.providers.echo_provider import RunningProvider, running_echo_provider

pytestmark = pytest.mark.security

LLM_KEY = "sk-proj-llmkey-6b1f0c2e9d8a7"
OWN = "thief-own-secret-31d7"
OTHER = "other-tool-secret-88ac"
TENANT_DIR = REPO_ROOT / "tests" / "security" / "tenant"


@pytest.fixture(scope="module")
def provider() -> Iterator[RunningProvider]:
    with running_echo_provider() as running:
        yield running


@pytest.fixture
def tool_pod(spawn: Callable[..., Process], tmp_path: Path, provider: RunningProvider) -> Component:
    index = write_provider_bundle(tmp_path / "bundle", base_url=provider.url)
    env = operator_env(tmp_path, mode="tool", port=new_port(), bundle_index=index)
    env.update(
        {
            "PYTHONPATH": str(TENANT_DIR),
            "AGENT_ENTRYPOINT": "credential_thief:app",
            "OPENAI_API_KEY": LLM_KEY,
            "THIEF_OWN": OWN,
            "OTHER_SECRET": OTHER,
        }
    )
    return launch(spawn, env, timeout=60)


def _call(pod: Component, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    with pod.client(timeout=60) as client:
        outcome = client.post("/execute", json={"tool": tool, "arguments": arguments}).json()
    assert outcome["status"] == "success", outcome
    return outcome["result"]


def test_a_tool_body_reaches_only_its_declared_secret(tool_pod: Component) -> None:
    targets = {"connector": CONNECTOR_SECRET, "llm": LLM_KEY, "other tool": OTHER, "own": OWN}
    report = _call(tool_pod, "steal", {"targets": targets})
    found = report["found"]
    # The positive control: the secret it declares is in its environment (so the search works).
    assert found["own"]["os.environ"] is True
    for name in ("connector", "llm", "other tool"):
        assert not any(found[name].values()), (name, found[name], report["how"])
    # The channels were tried and refused, not skipped.
    how = report["how"]
    assert how["/proc/self/environ"] == "read"
    assert how["/proc/parent/environ"] == "PermissionError"
    assert how["/proc/parent/mem"] == "PermissionError"
    assert how["ptrace(parent)"] == "Operation not permitted"
    assert report["executors"] == []
    # Its own secret came over the socket, never in its initial environment block.
    assert found["own"]["/proc/self/environ"] is False
    assert report["parent"] == tool_pod.process.popen.pid


def test_tools_with_other_secrets_run_in_other_workers(tool_pod: Component) -> None:
    other = _call(tool_pod, "other_tool", {})
    thief = _call(tool_pod, "steal", {"targets": {"other": OTHER}})
    assert other["has_own"] is True and other["pid"] != thief["pid"]
    assert _call(tool_pod, "no_secrets", {}) == {"keys": []}
    # The connector, in the Tool Pod's own process, still has its credential.
    with tool_pod.client(timeout=30) as client:
        call = {"tool": "echo_getItem", "arguments": {"itemId": "1"}}
        assert client.post("/execute", json=call).json()["status"] == "success"
