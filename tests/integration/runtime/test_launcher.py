"""The launcher as a real subprocess: AER mode, the IPv6 listener, and every start-up failure."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from agent_runtime.listen import dual_stack_available
from tests.conftest import Process
from tests.integration.runtime.launched import (
    EXAMPLE_AGENT_DIR,
    launch,
    new_port,
    operator_env,
    write_provider_bundle,
)
from tests.providers.echo_provider import RunningProvider


def _run(env: dict[str, str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_runtime.launcher"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_aer_serves_connector_and_tenant_tool_surface(
    spawn: Callable[..., Process], tmp_path: Path, provider: RunningProvider
) -> None:
    index = write_provider_bundle(tmp_path / "bundle", base_url=provider.url)
    aer = launch(spawn, operator_env(tmp_path, mode="aer", port=new_port(), bundle_index=index))
    assert httpx.get(f"{aer.url}/tools").status_code == 401
    with aer.client() as client:
        tools = {tool["name"]: tool for tool in client.get("/tools").json()["tools"]}
    assert set(tools) == {"echo_getItem", "echo_leak", "echo_stall", "word_count", "sign_message"}
    assert list(tools)[-2:] == ["word_count", "sign_message"]  # connector tools first, then the tenant's
    assert set(tools["word_count"]) == {
        "name",
        "description",
        "inputSchema",
        "is_local",
        "sensitive",
        "model_name",
    }
    assert (tools["word_count"]["is_local"], tools["sign_message"]["sensitive"]) == (True, True)
    assert tools["word_count"]["inputSchema"]["required"] == ["text"]
    assert "itemId" in tools["echo_getItem"]["inputSchema"]["properties"]
    assert aer.process.stop() == 0


def test_aer_materializes_agent_yaml_in_memory(spawn: Callable[..., Process], tmp_path: Path) -> None:
    env = operator_env(tmp_path, mode="aer", port=new_port(), bundle_index=None)
    env["AGENT_CONFIG_PATH"] = str(EXAMPLE_AGENT_DIR / "agent.yaml")
    aer = launch(spawn, env)
    with aer.client() as client:
        names = [tool["name"] for tool in client.get("/tools").json()["tools"]]
    assert names == ["echo_getEcho", "echo_createMessage", "word_count", "sign_message"]


@pytest.mark.skipif(not dual_stack_available(), reason="kernel without IPv6")
def test_listens_on_ipv6_loopback(spawn: Callable[..., Process], tmp_path: Path) -> None:
    env = operator_env(tmp_path, mode="tool", port=new_port("::1"), bundle_index=None)
    env["APP_HOST"] = "::1"
    pod = launch(spawn, env)
    assert httpx.get(f"{pod.url}/healthz").json() == {"status": "alive"}
    assert pod.process.stop() == 0
    assert "listener bind resolved: host=::1" in pod.process.output()


def _one_error_record(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # nothing but JSON records, no raw traceback
    errors = [r for r in records if r["level"] == "ERROR"]
    assert len(errors) == 1, records
    return errors[0]


def test_entrypoint_import_failure_is_one_json_error_and_nonzero_exit(tmp_path: Path) -> None:
    package = tmp_path / "tenant_broken"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "agent.py").write_text("import nonexistent_dependency_xyz\n")
    env = operator_env(tmp_path, mode="tool", port=new_port(), bundle_index=None)
    env.update(PYTHONPATH=str(tmp_path), AGENT_ENTRYPOINT="tenant_broken.agent:app")
    result = _run(env)
    assert result.returncode == 1
    record = _one_error_record(result)
    assert "tenant_broken.agent" in str(record["message"]) and "nonexistent_dependency_xyz" in str(
        record["message"]
    )
    assert record["error_type"] == "EntrypointError"


@pytest.mark.parametrize(
    ("changes", "exit_code", "message"),
    [
        ({"RUNNER_MODE": None}, 2, "RUNNER_MODE is not set; set it to one of: aer, tool, memory, oe"),
        ({"RUNNER_MODE": "batch"}, 2, "RUNNER_MODE='batch' is not a runner mode"),
        ({"RUNNER_MODE": "memory"}, 1, "MEMORY_STORE_TYPE=sqlite (the default) needs MEMORY_SQLITE_PATH"),
        ({"RUNNER_MODE": "memory", "MEMORY_STORE_TYPE": "mongodb"}, 1, "needs MEMORY_MONGODB_URI"),
        ({"RUNNER_MODE": "oe"}, 1, "no client token: set OE_CLIENT_TOKEN_FILE"),
        ({"RUNNER_MODE": "oe", "OE_CLIENT_TOKEN": "t", "OE_STORE_TYPE": "redis"}, 1, "OE_STORE_TYPE"),
        ({"RUNNER_MODE": "oe", "OE_CLIENT_TOKEN": "t", "OE_SQLITE_PATH": "/x"}, 1, "OE_REGISTRATIONS_DIR"),
        (
            {"RUNTIME_TOKEN_FILE": "/nonexistent/token"},
            1,
            "RUNTIME_TOKEN_FILE=/nonexistent/token: no such file",
        ),
        ({"ECHO_SIGNING_KEY": None}, 1, "requires the secret env ECHO_SIGNING_KEY"),
        (
            {"ECHO_TOKEN": ""},
            1,
            "connector 'echo' reads its credential from env ECHO_TOKEN, which is not set",
        ),
        ({"AGENT_ENTRYPOINT": "echo_agent.agent"}, 1, "is not of the form package.module:app"),
        ({"AGENTIC_CONNECTOR_BUNDLE_PATH": "/nonexistent/index.yaml"}, 1, "/nonexistent/index.yaml"),
        ({"RUNNER_MODE": "aer", "AGENT_ENTRYPOINT": None}, 1, "RUNNER_MODE=aer needs AGENT_ENTRYPOINT"),
    ],
)
def test_startup_failures_are_clear(
    tmp_path: Path, changes: dict[str, str | None], exit_code: int, message: str
) -> None:
    index = write_provider_bundle(tmp_path / "bundle", base_url="http://127.0.0.1:9")  # never called
    env = operator_env(tmp_path, mode="tool", port=new_port(), bundle_index=index)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    result = _run(env)
    assert result.returncode == exit_code
    assert message in str(_one_error_record(result)["message"])
