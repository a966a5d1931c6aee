"""Bad input: each case is refused with a reason and a message naming the field and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from agent_operator.inputs import InputProblem, SecretMeta
from agent_operator.reconcile import plan_agent
from agent_operator.settings import RenderSettings
from tests.unit.operator.specimens import agent_body, connector_body, inputs, petstore_text

SETTINGS = RenderSettings()


def _refusal(**kwargs: Any) -> InputProblem:
    with pytest.raises(InputProblem) as caught:
        plan_agent(inputs(**kwargs), settings=SETTINGS)
    return caught.value


def test_missing_connector() -> None:
    problem = _refusal(agent=agent_body(connectors=["petstore", "jira"]))
    assert (problem.reason, problem.condition) == ("ConnectorMissing", "BundleReady")
    assert "'jira'" in problem.message and "spec.connectors" in problem.message


def test_missing_configmap() -> None:
    problem = _refusal(config_maps={})
    assert problem.reason == "CatalogMissing" and "petstore-openapi" in problem.message


def test_missing_configmap_key() -> None:
    problem = _refusal(config_maps={"petstore-openapi": {"other.yaml": "x"}})
    assert problem.reason == "CatalogKeyMissing"
    assert "openapi.json" in problem.message and "other.yaml" in problem.message


@pytest.mark.parametrize("text", ["not: [valid", '{"openapi": "2.0", "paths": {}}', '{"swagger": "2.0"}'])
def test_invalid_openapi(text: str) -> None:
    problem = _refusal(config_maps={"petstore-openapi": {"openapi.json": text}})
    assert problem.reason == "CatalogInvalid" and "petstore-openapi" in problem.message


def test_expose_allow_entry_naming_no_operation() -> None:
    problem = _refusal(connectors=[connector_body(expose={"allow": ["listPets", "deleteEverything"]})])
    assert problem.reason == "ExposeAllowUnknown"
    assert "deleteEverything" in problem.message and "listPets" in problem.message


@pytest.mark.parametrize("key", ["../openapi.json", "a/b.json", ".."])
def test_catalog_key_path_escape(key: str) -> None:
    connector = connector_body(catalog={"configMapKeyRef": {"name": "petstore-openapi", "key": key}})
    problem = _refusal(connectors=[connector], config_maps={"petstore-openapi": {key: petstore_text()}})
    assert problem.reason == "PathEscape" and "configMapKeyRef.key" in problem.message


@pytest.mark.parametrize(
    "image", ["Registry.Example.com/UPPER/Case:1", "no spaces:1 2", "repo:tag@sha256:xyz", ""]
)
def test_image_that_is_not_a_valid_reference(image: str) -> None:
    problem = _refusal(agent=agent_body(image=image))
    assert (problem.reason, problem.condition) == ("ImageInvalid", "Ready")
    assert "spec.image" in problem.message


def test_missing_secret_and_key() -> None:
    assert (
        _refusal(secrets={"petstore-creds": SecretMeta("1", frozenset({"token"}))}).reason == "SecretMissing"
    )
    wrong_key = {
        "llm-keys": SecretMeta("1", frozenset({"anthropic"})),
        "petstore-creds": SecretMeta("1", frozenset({"token"})),
    }
    problem = _refusal(secrets=wrong_key)
    assert problem.reason == "SecretKeyMissing" and "'openai'" in problem.message


def test_env_set_twice_in_one_component() -> None:
    agent = agent_body(
        components={
            "tool": {
                "secretEnv": [
                    {"name": "PETSTORE_TOKEN", "secretKeyRef": {"name": "llm-keys", "key": "openai"}}
                ]
            }
        }
    )
    problem = _refusal(agent=agent)
    assert problem.reason == "EnvConflict" and "PETSTORE_TOKEN" in problem.message


def test_a_file_larger_than_one_configmap_is_refused_not_truncated() -> None:
    with pytest.raises(InputProblem) as caught:
        plan_agent(inputs(), settings=RenderSettings(configmap_budget_bytes=300))
    assert caught.value.reason == "BundleTooLarge" and "expose.allow" in caught.value.message


def test_too_many_configmaps_is_refused() -> None:
    with pytest.raises(InputProblem) as caught:
        plan_agent(inputs(), settings=RenderSettings(configmap_budget_bytes=1_500, max_bundle_configmaps=1))
    assert caught.value.reason == "BundleTooLarge"


def test_messages_never_carry_secret_values() -> None:
    # The operator only ever sees Secret keys and resourceVersions; a refusal can only name those.
    problem = _refusal(secrets={"llm-keys": SecretMeta("7", frozenset({"x"}))})
    assert "7" not in problem.message.replace("openai", "")


def _agent_without_image() -> dict[str, Any]:
    body = agent_body()
    del body["spec"]["image"]
    return body


def test_agent_without_image_runs_the_default_runtime_image() -> None:
    settings = RenderSettings(default_image="agent-engine/runtime:0.1.0")
    plan = plan_agent(inputs(agent=_agent_without_image()), settings=settings)
    deployments = [d.manifest for d in plan.objects if d.manifest["kind"] == "Deployment"]
    images = {c["image"] for d in deployments for c in d["spec"]["template"]["spec"]["containers"]}
    assert deployments and images == {"agent-engine/runtime:0.1.0"}


def test_agent_without_image_and_no_default_is_refused() -> None:
    problem = _refusal(agent=_agent_without_image())
    assert problem.reason == "ImageInvalid"
    assert "spec.image" in problem.message and "AGENT_OPERATOR_DEFAULT_IMAGE" in problem.message


@pytest.mark.parametrize("env", ["PATH", "AGENTIC_CONNECTOR_BUNDLE_PATH", "RUNTIME_TOKEN"])
def test_connector_credential_env_that_is_a_platform_variable(env: str) -> None:
    connector = connector_body(auth={"type": "bearer", "env": env, "secretKeyRef": {"name": "x", "key": "y"}})
    problem = _refusal(connectors=[connector])
    assert (problem.reason, problem.condition) == ("AuthEnvReserved", "BundleReady")
    assert f"spec.auth.env {env!r}" in problem.message and "PETSTORE_TOKEN" in problem.message
