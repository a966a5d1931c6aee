"""Contract: the AER and Tool Pod containers the operator renders really start and serve.

Each rendered container's command and env run as a local process; the bundle ConfigMap(s) and the token
Secret are written to disk where the pod would mount them (mount paths mapped into a temp directory), and a
real tool call goes through the Tool Pod to a loopback provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_operator.inputs import AgentInputs, SecretMeta
from agent_operator.models import Agent, Connector
from agent_operator.reconcile import Plan, plan_agent
from agent_operator.settings import RenderSettings
from agent_runtime import contract
from tests.conftest import REPO_ROOT, Process
from tests.providers.echo_provider import running_echo_provider
from tests.rendered_pods import run_rendered_container

EXAMPLE_AGENT = REPO_ROOT / "examples" / "echo-agent"
TOKEN = "contract-test-runtime-token"  # a test value, not a secret
PROVIDER_CREDENTIAL = "provider-credential-for-test"
SIGNING_KEY = "signing-key-for-test"

OPENAPI = {
    "openapi": "3.0.3",
    "info": {"title": "Echo", "version": "1"},
    "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    "security": [{"bearer": []}],
    "paths": {
        "/things/{thingId}": {
            "get": {
                "operationId": "getThing",
                "summary": "Get a thing",
                "parameters": [
                    {"name": "thingId", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "verbose", "in": "query", "schema": {"type": "boolean"}},
                ],
                "responses": {"200": {"description": "ok"}},
            }
        }
    },
}


def contract_plan(provider_url: str) -> Plan:
    agent = {
        "metadata": {"name": "echo", "namespace": "team-a", "uid": "uid-echo", "generation": 1},
        "spec": {
            "image": "registry.example.com/team-a/echo-agent:0.1.0",
            "entrypoint": "echo_agent.agent:app",
            "connectors": ["echo"],
            "components": {
                "tool": {
                    "secretEnv": [
                        {"name": "ECHO_SIGNING_KEY", "secretKeyRef": {"name": "tool-keys", "key": "sign"}}
                    ]
                }
            },
        },
    }
    connector = {
        "metadata": {"name": "echo", "namespace": "team-a", "generation": 1},
        "spec": {
            "source": {"type": "openapi", "baseUrl": f"{provider_url}/echo"},
            "catalog": {"configMapKeyRef": {"name": "echo-openapi", "key": "openapi.json"}},
            "expose": {"allow": ["getThing"]},
            "auth": {
                "type": "bearer",
                "env": "ECHO_TOKEN",
                "secretKeyRef": {"name": "echo-creds", "key": "token"},
            },
        },
    }
    inputs = AgentInputs(
        agent=Agent.from_body(agent),
        connectors={"echo": Connector.from_body(connector)},
        config_maps={"echo-openapi": {"openapi.json": json.dumps(OPENAPI)}},
        secrets={
            "echo-creds": SecretMeta(resource_version="1", keys=frozenset({"token"})),
            "tool-keys": SecretMeta(resource_version="1", keys=frozenset({"sign"})),
        },
    )
    return plan_agent(inputs, settings=RenderSettings())


def _objects(plan: Plan, kind: str) -> dict[str, dict[str, Any]]:
    return {d.manifest["metadata"]["name"]: d.manifest for d in plan.objects if d.manifest["kind"] == kind}


def test_rendered_aer_and_tool_pod_start_and_a_tool_call_reaches_the_provider(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    with running_echo_provider() as provider:
        plan = contract_plan(provider.url)
        config_maps = {name: cm["data"] for name, cm in _objects(plan, "ConfigMap").items()}
        secrets = {
            "echo-runtime-token": {"token": TOKEN},
            "echo-creds": {"token": PROVIDER_CREDENTIAL},
            "tool-keys": {"sign": SIGNING_KEY},
        }
        deployments = _objects(plan, "Deployment")
        procs = {}
        for component in ("aer", "tool"):
            procs[component] = run_rendered_container(
                deployment=deployments[f"echo-{component}"],
                config_maps=config_maps,
                secrets=secrets,
                root=tmp_path / component,
                spawn=spawn,
                pythonpath=f"{EXAMPLE_AGENT}:{REPO_ROOT}",
            )
        with httpx.Client(timeout=10) as http:
            for component, (_, port) in procs.items():
                ready = http.get(f"http://127.0.0.1:{port}{contract.READY_PATH}")
                assert ready.status_code == 200, (component, ready.text)
            _, tool_port = procs["tool"]
            base = f"http://127.0.0.1:{tool_port}"
            assert http.post(f"{base}/execute", json={"tool": "echo_getThing"}).status_code == 401
            listed = http.get(f"{base}/tools", headers={"Authorization": f"Bearer {TOKEN}"})
            assert listed.status_code == 200, listed.text
            names = {t["name"] for t in listed.json()["tools"]}
            tool_name = next(n for n in names if n.endswith("getThing"))
            answer = http.post(
                f"{base}/execute",
                headers={"Authorization": f"Bearer {TOKEN}"},
                json={
                    "tool": tool_name,
                    "arguments": {"thingId": "t-42", "verbose": True},
                    "execution_id": "e1",
                },
            )
    assert answer.status_code == 200, answer.text
    outcome = answer.json()
    assert outcome["status"] == "success", outcome
    echoed = outcome["result"]["body"] if "body" in outcome["result"] else outcome["result"]
    assert echoed["path"] == "/echo/things/t-42"
    assert echoed["query"] == "verbose=true"
    # The provider got the Secret's value; what the Tool Pod answers has it redacted (issue 27).
    assert echoed["headers"]["authorization"] == "Bearer [REDACTED]"
    assert PROVIDER_CREDENTIAL not in answer.text
    for proc, _ in procs.values():
        assert PROVIDER_CREDENTIAL not in proc.output() and SIGNING_KEY not in proc.output()


@pytest.mark.parametrize("component", ["aer", "tool"])
def test_rendered_env_names_only_contract_paths(component: str) -> None:
    plan = contract_plan("http://127.0.0.1:9")
    container = _objects(plan, "Deployment")[f"echo-{component}"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env[contract.BUNDLE_PATH_ENV] == contract.BUNDLE_INDEX_PATH
    assert env[contract.TOKEN_FILE_ENV] == contract.TOKEN_FILE_PATH
    assert env[contract.ENTRYPOINT_ENV] == "echo_agent.agent:app"
