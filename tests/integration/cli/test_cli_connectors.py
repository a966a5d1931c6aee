"""`agentengine connectors ...` against the real OE and Tool Pod: a connector's test_connection runs in the
Tool Pod with the credential that lives there, reached only through the OE (issue 29)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from agent_runtime.connectors import build_bundle, write_bundle
from agent_runtime.connectors.builtin.registry import materialize_builtin
from agent_runtime.connectors.compile import compile_catalog
from agent_runtime.connectors.toolyaml import materialize_connector, scaffold_tool_yaml
from tests.conftest import Process
from tests.integration.cli.conftest import checked_against_openapi
from tests.integration.cli.driver import ok_json, one_line_error, run
from tests.integration.loop.harness import LOOP_TENANT, RUNTIME_TOKEN, Platform, Tenant
from tests.integration.runtime.launched import CONNECTOR_SECRET, PROVIDER_OPENAPI
from tests.providers.llm_peer import RunningLLMPeer


def _bundle_with_builtins(directory: Path, provider_url: str) -> Path:
    """The loop Agent's OpenAPI connector `echo`, plus two built-in connectors holding its credential: `api`
    (http, the provider) and `down` (stripe, where nothing listens)."""
    catalog = compile_catalog(PROVIDER_OPENAPI, connector_name="echo")
    openapi = materialize_connector(scaffold_tool_yaml(catalog, base_url=provider_url), catalog)
    builtins = [
        materialize_builtin(
            name="api",
            type_name="http",
            config={"base_url": provider_url + "/echo", "auth": {"type": "bearer"}},
            credentials={"token": "ECHO_TOKEN"},
        ),
        materialize_builtin(
            name="down",
            type_name="stripe",
            config={"base_url": "http://127.0.0.1:9/v1"},
            credentials={"api_key": "ECHO_TOKEN"},
        ),
    ]
    return write_bundle(build_bundle([openapi], builtins), directory)


@pytest.fixture
def platform(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> Iterator[Platform]:
    tenant = Tenant(
        entrypoint=LOOP_TENANT.entrypoint,
        pythonpath=LOOP_TENANT.pythonpath,
        bundle=_bundle_with_builtins,
        tool_env=LOOP_TENANT.tool_env,
    )
    started = Platform(
        tmp=tmp_path, spawn=spawn, llm_base_url=llm_peer.base_url, provider_url=provider_url, tenant=tenant
    )
    with checked_against_openapi(started.start()) as checked:
        yield checked


def test_connector_test_runs_in_the_tool_pod_and_never_shows_the_credential(platform: Platform) -> None:
    reached = ok_json(platform, "-n", "team-a", "connectors", "test", "api", "--agent", "loop")
    assert reached["ok"] is True and reached["agent"] == "team-a/loop" and reached["connector"] == "api"
    assert "answered HTTP" in reached["detail"]
    table = run(platform, "connectors", "test", "api", "-a", "team-a/loop")
    assert table.returncode == 0 and "answered HTTP" in table.stdout

    down = run(platform, "connectors", "test", "down", "-a", "team-a/loop", "-o", "json")
    assert down.returncode == 1 and json.loads(down.stdout)["ok"] is False
    assert "the test failed" in one_line_error(down, code=1)

    openapi = ok_json(platform, "connectors", "test", "echo", "-a", "team-a/loop")
    assert openapi["ok"] is True and "OpenAPI" in openapi["detail"]

    missing = run(platform, "connectors", "test", "nope", "-a", "team-a/loop")
    assert "no connector 'nope'" in one_line_error(missing, code=3)
    no_agent = run(platform, "connectors", "test", "api", "-a", "team-a/nobody")
    assert "not found" in one_line_error(no_agent, code=3)
    for done in (reached, down, openapi, missing, no_agent, table):
        shown = json.dumps(done) if isinstance(done, dict) else done.stdout + done.stderr
        assert CONNECTOR_SECRET not in shown

    types = run(platform, "connectors", "types")
    assert types.returncode == 0 and "http" in types.stdout.split() and "TYPE" in types.stdout
    listed = ok_json(platform, "connectors", "types")
    assert "http" in [entry["type"] for entry in listed["types"]]


def test_only_the_oe_opens_the_tool_pods_connector_test(platform: Platform) -> None:
    """The AER holds the runtime token; with the OE's keys installed it does not open the Tool Pod's
    connector test (only the OE's signed statement does), nor does no credential at all."""
    url = f"http://127.0.0.1:{platform.tool_port}/connectors/api/test"
    assert httpx.post(url, headers={"authorization": f"Bearer {RUNTIME_TOKEN}"}).status_code == 401
    assert httpx.post(url).status_code == 401
    signed = httpx.post(url, headers=platform.runtime_headers("tool"))
    assert signed.status_code == 200 and signed.json()["ok"] is True
    # A statement for another audience (the AER's) is refused too.
    assert httpx.post(url, headers=platform.runtime_headers("aer")).status_code == 403


def test_testing_a_connector_takes_the_right_to_invoke_its_agent(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> None:
    """The test reaches the provider with the Agent's credential: a caller who may not invoke the Agent
    gets the 403 naming agents/invoke, and the Tool Pod is never asked."""
    platform = Platform(tmp=tmp_path, spawn=spawn, llm_base_url=llm_peer.base_url, provider_url=provider_url)
    platform.tenant = Tenant(
        entrypoint=LOOP_TENANT.entrypoint,
        pythonpath=LOOP_TENANT.pythonpath,
        bundle=_bundle_with_builtins,
        tool_env=LOOP_TENANT.tool_env,
    )
    platform.start_tool_pod()
    platform.start_aer()
    platform.write_registrations()  # team-a/loop and team-b/other (the same pods)
    platform.start_oe(extra={"OE_CLIENT_TOKEN_NAMESPACES": "team-a"})
    refused = run(platform, "connectors", "test", "api", "-a", "team-b/other")
    line = one_line_error(refused, code=4)
    assert "agents/invoke" in line and "team-b" in line
    assert ok_json(platform, "connectors", "test", "api", "-a", "team-a/loop")["ok"] is True
