"""The example tenant agent and its connector files stay loadable and in sync with their sources."""

from pathlib import Path

import pytest

from agent_runtime.connectors import compile_catalog, load_tool_defs, resolve_runtime_bundle
from agent_runtime.sdk import load_app
from tests.conftest import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "echo-agent"


def test_compiled_catalog_matches_its_openapi_document() -> None:
    compiled = compile_catalog(EXAMPLE / "connectors" / "echo" / "openapi.yaml", connector_name="echo")
    stored = load_tool_defs(EXAMPLE / "connectors" / "echo" / "tool_defs.yaml")
    assert stored.dumps() == compiled.dumps(), "regenerate tool_defs.yaml from openapi.yaml"


def test_agent_yaml_materializes_the_echo_connector() -> None:
    bundle = resolve_runtime_bundle(env={}, agent_config=EXAMPLE / "agent.yaml")
    [echo] = bundle.connectors
    assert [tool["name"] for tool in echo.tool_schemas()] == ["echo_getEcho", "echo_createMessage"]
    assert echo.auth is not None and echo.auth.env == "ECHO_TOKEN"


def test_example_app_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    app = load_app("echo_agent.agent:app")
    assert [spec.name for spec in app.local_tools()] == ["word_count"]
    [remote] = app.remote_tools()
    assert (remote.name, remote.required_secrets, remote.sensitive) == (
        "sign_message",
        ("ECHO_SIGNING_KEY",),
        True,
    )
    assert app.entrypoint_function is not None


def test_example_dockerfile_builds_from_the_runtime_image() -> None:
    text = (EXAMPLE / "Dockerfile").read_text()
    assert "FROM ${RUNTIME_IMAGE}" in text and "AGENT_ENTRYPOINT=echo_agent.agent:app" in text
    runtime = Path(REPO_ROOT / "images" / "runtime" / "Dockerfile").read_text()
    assert 'CMD ["python", "-m", "agent_runtime.launcher"]' in runtime and "USER 10001:10001" in runtime
