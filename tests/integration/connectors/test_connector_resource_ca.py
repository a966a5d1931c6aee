"""Issue 13 item 4, the Connector resource side: a Connector whose spec.tls names a ConfigMap key holding a
private CA is rendered by the operator into a bundle (`tls.ca_env`) and a Tool Pod env var; a Tool Pod
launched from exactly those trusts that CA and nothing else (not SSL_CERT_FILE).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_operator.inputs import AgentInputs, SecretMeta
from agent_operator.models import Agent, Connector
from agent_operator.reconcile import Plan, plan_agent
from agent_operator.settings import RenderSettings
from agent_runtime.connectors import BUNDLE_INDEX
from tests.cluster import pki
from tests.conftest import Process
from tests.integration.runtime.launched import PROVIDER_OPENAPI, launch, new_port, operator_env
from tests.providers.echo_provider import RunningProvider, running_echo_provider

NAMESPACE = "team-a"
CA_ENV = "TLS_CA_ECHO"


class _Pki:
    def __init__(self, directory: Path) -> None:
        self.ca = pki.make_ca("connector-resource-private-ca")
        leaf = pki.issue(self.ca, common_name="provider", hosts=("127.0.0.1",), server=True)
        self.cert_file, self.key_file = pki.write_pair(leaf, directory, "provider")
        self.ca_file = directory / "ca.pem"
        self.ca_file.write_bytes(self.ca.cert_pem)


@pytest.fixture(scope="module")
def private_pki(tmp_path_factory: pytest.TempPathFactory) -> _Pki:
    return _Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_provider(private_pki: _Pki) -> Iterator[RunningProvider]:
    with running_echo_provider(tls=(str(private_pki.cert_file), str(private_pki.key_file))) as running:
        yield running


def _plan(provider: RunningProvider, private_pki: _Pki, *, tls: bool) -> Plan:
    """What the operator renders for an Agent using Connector `echo` (its CA from ConfigMap echo-ca)."""
    spec: dict[str, Any] = {
        "source": {"type": "openapi", "baseUrl": provider.url},
        "catalog": {"configMapKeyRef": {"name": "echo-openapi", "key": "openapi.json"}},
        "auth": {
            "type": "bearer",
            "env": "ECHO_TOKEN",
            "secretKeyRef": {"name": "echo-creds", "key": "token"},
        },
    }
    if tls:
        spec["tls"] = {"caConfigMapKeyRef": {"name": "echo-ca", "key": "ca.crt"}}
    meta = {"namespace": NAMESPACE, "generation": 1}
    connector = Connector.from_body(
        {"kind": "Connector", "metadata": {"name": "echo", "uid": "uid-echo", **meta}, "spec": spec}
    )
    agent = Agent.from_body(
        {
            "kind": "Agent",
            "metadata": {"name": "echo-agent", "uid": "uid-agent", **meta},
            "spec": {
                "image": "registry.example.com/a/echo:1",
                "entrypoint": "echo_agent.agent:app",
                "connectors": ["echo"],
            },
        }
    )
    inputs = AgentInputs(
        agent=agent,
        connectors={"echo": connector},
        config_maps={
            "echo-openapi": {"openapi.json": json.dumps(PROVIDER_OPENAPI)},
            "echo-ca": {"ca.crt": private_pki.ca.cert_pem.decode()},
        },
        secrets={"echo-creds": SecretMeta(resource_version="1", keys=frozenset({"token"}))},
    )
    return plan_agent(inputs, settings=RenderSettings())


def _materialize(plan: Plan, directory: Path) -> tuple[Path, dict[str, str]]:
    """The bundle ConfigMaps as the Tool Pod mounts them, and the Tool Pod's plain (non-platform) CA env."""
    directory.mkdir()
    for part in plan.bundle.parts:
        for name, text in part.data.items():
            (directory / name).write_text(text)
    tool = next(
        d.manifest
        for d in plan.objects
        if d.manifest["kind"] == "Deployment" and d.manifest["metadata"]["name"] == "echo-agent-tool"
    )
    env = tool["spec"]["template"]["spec"]["containers"][0]["env"]
    return directory / BUNDLE_INDEX, {e["name"]: e["value"] for e in env if e["name"] == CA_ENV}


def _call(component: Any) -> dict[str, Any]:
    with component.client(timeout=15) as client:
        body = {"tool": "echo_getItem", "arguments": {"itemId": "7"}, "execution_id": "ex-ca", "step": 1}
        response = client.post("/execute", json=body)
    assert response.status_code == 200
    return response.json()


def test_a_tool_pod_from_a_connector_with_a_configmap_ca_trusts_exactly_that_ca(
    spawn: Callable[..., Process], tmp_path: Path, tls_provider: RunningProvider, private_pki: _Pki
) -> None:
    plan = _plan(tls_provider, private_pki, tls=True)
    index, ca_env = _materialize(plan, tmp_path / "bundle")
    assert set(ca_env) == {CA_ENV}
    assert json.loads((index.parent / "echo.yaml").read_text())["tls"] == {"ca_env": CA_ENV}
    env = {**operator_env(tmp_path, mode="tool", port=new_port(), bundle_index=index), **ca_env}
    answer = _call(launch(spawn, env))
    assert answer["status"] == "success", answer
    assert answer["result"]["body"]["path"] == "/echo/items/7"


def test_without_the_connector_ca_the_call_fails_even_with_ssl_cert_file(
    spawn: Callable[..., Process], tmp_path: Path, tls_provider: RunningProvider, private_pki: _Pki
) -> None:
    plan = _plan(tls_provider, private_pki, tls=False)
    index, ca_env = _materialize(plan, tmp_path / "bundle")
    assert ca_env == {}
    env = operator_env(tmp_path, mode="tool", port=new_port(), bundle_index=index)
    env["SSL_CERT_FILE"] = str(private_pki.ca_file)  # the process environment never decides trust
    answer = _call(launch(spawn, env))
    # The Tool Pod answers only the category (the executor's message names tls.ca_file/tls.ca_env, see
    # test_public_document_shapes.py): SSL_CERT_FILE, which names the provider's CA, was not used.
    assert answer["status"] == "error", answer
    assert answer["error"]["category"] == "connection", answer


def test_a_bundle_naming_the_ca_env_without_it_refuses_to_start_naming_tls(
    spawn: Callable[..., Process], tmp_path: Path, tls_provider: RunningProvider, private_pki: _Pki
) -> None:
    index, _ = _materialize(_plan(tls_provider, private_pki, tls=True), tmp_path / "bundle")
    env = operator_env(tmp_path, mode="tool", port=new_port(), bundle_index=index)
    with pytest.raises(RuntimeError, match=rf"tls\.ca_env names {CA_ENV}, which is not set"):
        launch(spawn, env)
