"""component_env: one function gives the operator's pods and `agentengine dev`'s processes their platform
environment; the two differ only in paths, addresses and where the pod IP comes from."""

from __future__ import annotations

import pytest

from agent_runtime import contract
from agent_runtime.component_env import (
    ComponentInputs,
    EnvVar,
    MemoryStoreSettings,
    ModelSettings,
    as_kubernetes,
    as_process,
    component_env,
)
from agent_runtime.contract import RunnerMode

pytestmark = pytest.mark.unit

MODEL = ModelSettings(base_url="http://model/v1", model="m", key_env="K", credential_names=("K",))


def _inputs(**more: object) -> ComponentInputs:
    return ComponentInputs(app_id="ns.agent", entrypoint="pkg.mod:app", oe_url="http://oe:8080", **more)  # type: ignore[arg-type]


def test_the_aer_gets_the_oe_and_the_project_scope_and_no_credential_names() -> None:
    env = {e.name: e for e in component_env(RunnerMode.AER, _inputs(model=MODEL, bundle_digest="d"))}
    assert env[contract.OE_URL_ENV].value == "http://oe:8080"
    assert env[contract.REQUIRE_PROJECT_SCOPED_DB_ENV].value == "true"
    assert env[contract.LLM_API_KEY_ENV_ENV].value == "K"
    assert contract.LLM_CREDENTIAL_NAMES_ENV not in env  # only the Tool Pod holds the key
    assert env[contract.POD_IP_ENV].field_path == "status.podIP"
    assert env[contract.BUNDLE_DIGEST_ENV].value == "d"


def test_the_tool_pod_names_the_model_credential_and_never_gets_the_oe_url() -> None:
    names = [e.name for e in component_env(RunnerMode.TOOL, _inputs(model=MODEL))]
    assert contract.LLM_CREDENTIAL_NAMES_ENV in names
    assert contract.OE_URL_ENV not in names
    assert contract.BUNDLE_DIGEST_ENV not in names  # no digest given: nothing to check the bundle against


def test_memory_gets_its_store_and_no_tenant_code() -> None:
    inputs = _inputs(memory_store=MemoryStoreSettings(sqlite_path="/data/m.db"), model=MODEL)
    env = {e.name: e.value for e in component_env(RunnerMode.MEMORY, inputs)}
    assert env["MEMORY_STORE_TYPE"] == "sqlite" and env["MEMORY_SQLITE_PATH"] == "/data/m.db"
    assert contract.ENTRYPOINT_ENV not in env and contract.LLM_BASE_URL_ENV not in env


def test_a_pod_and_a_process_differ_only_where_the_pod_ip_comes_from() -> None:
    pod = component_env(RunnerMode.TOOL, _inputs())
    local = component_env(RunnerMode.TOOL, _inputs(pod_ip="127.0.0.1"))
    assert [e.name for e in pod] == [e.name for e in local]
    assert {
        "name": contract.POD_IP_ENV,
        "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
    } in as_kubernetes(pod)
    assert as_process(local)[contract.POD_IP_ENV] == "127.0.0.1"
    with pytest.raises(ValueError, match="give ComponentInputs a value"):
        as_process(pod)


def test_the_public_key_is_named_only_when_the_oe_signs() -> None:
    without = [e.name for e in component_env(RunnerMode.AER, _inputs())]
    with_key = component_env(RunnerMode.AER, _inputs(oe_public_key_file="/k.pem"))
    assert contract.OE_PUBLIC_KEY_FILE_ENV not in without
    assert EnvVar(contract.OE_PUBLIC_KEY_FILE_ENV, "/k.pem") in with_key
