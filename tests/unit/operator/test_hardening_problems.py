"""Issue 12's bad input, decided purely: names the operator cannot derive children from, unusable base URLs,
connector names the compiler refuses, hostile catalogs, large bundles, and bundle tampering."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from agent_operator.bundle import bundle_stem, bundle_tampering
from agent_operator.inputs import CatalogFailure, InputProblem, catalog_key
from agent_operator.reconcile import plan_agent
from agent_operator.settings import RenderSettings
from tests.unit.connectors.test_document_bounds import billion_laughs
from tests.unit.operator.specimens import agent_body, connector_body, inputs, petstore_text

SETTINGS = RenderSettings()


def _refusal(**kwargs: Any) -> InputProblem:
    with pytest.raises(InputProblem) as caught:
        plan_agent(inputs(**kwargs), settings=SETTINGS)
    return caught.value


@pytest.mark.parametrize("name", ["my.agent", "1agent", "agent-", "a" * 41])
def test_agent_names_no_service_can_carry(name: str) -> None:
    problem = _refusal(agent=agent_body(name=name))
    assert (
        problem.reason == "NameInvalid" and "metadata.name" in problem.message and "e.g." in problem.message
    )


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://api.example.com:99999/v1", "65535"),
        ("ftp://api.example.com/v1", "http or https"),
        ("https:///v1", "no host"),
    ],
)
def test_unusable_connector_base_urls(url: str, says: str) -> None:
    problem = _refusal(connectors=[connector_body(source={"type": "openapi", "baseUrl": url})])
    assert (problem.reason, problem.condition) == ("BaseUrlInvalid", "BundleReady")
    assert "spec.source.baseUrl" in problem.message and says in problem.message


def test_an_unusable_llm_base_url() -> None:
    agent = agent_body()
    agent["spec"]["llm"]["baseUrl"] = "https://llm.example.com:70000/v1"
    problem = _refusal(agent=agent)
    assert problem.reason == "LlmBaseUrlInvalid" and "spec.llm.baseUrl" in problem.message


def test_a_connector_name_the_compiler_refuses_names_the_field_not_the_config_map() -> None:
    connector = connector_body(name="my.api")
    problem = _refusal(
        agent=agent_body(connectors=["my.api"]),
        connectors=[connector],
        config_maps={"my.api-openapi": {"openapi.json": petstore_text()}},
    )
    assert problem.reason == "ConnectorNameInvalid"
    assert "metadata.name" in problem.message and "ConfigMap" not in problem.message


def test_a_billion_laughs_catalog_is_too_complex() -> None:
    problem = _refusal(config_maps={"petstore-openapi": {"openapi.json": billion_laughs(9)}})
    assert (problem.reason, problem.condition) == ("CatalogTooComplex", "BundleReady")
    assert "'petstore-openapi' key 'openapi.json'" in problem.message and "aliases" in problem.message


def test_a_catalog_compiled_ahead_is_used_and_its_failure_reported() -> None:
    text = petstore_text()
    failure = CatalogFailure(reason="CatalogTooComplex", detail="compiling it takes more than 20s")
    base = inputs()
    ahead = type(base)(**{**base.__dict__, "catalogs": {catalog_key("petstore", text): failure}})
    with pytest.raises(InputProblem) as caught:
        plan_agent(ahead, settings=SETTINGS)
    assert caught.value.reason == "CatalogTooComplex" and "more than 20s" in caught.value.message


def test_missing_catalog_and_too_large_bundles_say_what_to_do() -> None:
    assert "--server-side" in _refusal(config_maps={}).message
    small = RenderSettings(configmap_budget_bytes=500)
    with pytest.raises(InputProblem) as caught:
        plan_agent(inputs(), settings=small)
    assert caught.value.reason == "BundleTooLarge" and "spec.expose.allow" in caught.value.message


def _bundle_files() -> tuple[str, dict[str, str]]:
    plan = plan_agent(inputs(), settings=SETTINGS)
    (part,) = plan.bundle.parts
    return part.name, dict(part.data)


def test_a_bundle_matches_the_digest_in_its_name_until_someone_changes_it() -> None:
    name, files = _bundle_files()
    stem = bundle_stem(name)
    assert stem is not None and stem[0] == name
    assert bundle_tampering(files, digest_prefix=stem[1]) is None
    forged = {
        k: v.replace("https://petstore.example.com/v1", "https://attacker.example.com")
        for k, v in files.items()
    }
    assert "does not match its hash" in (bundle_tampering(forged, digest_prefix=stem[1]) or "")
    extra = {**files, "evil.yaml": "x"}
    assert "does not list" in (bundle_tampering(extra, digest_prefix=stem[1]) or "")
    index = files["index.yaml"].replace('"tools": 2', '"tools": 3')
    assert "does not hash" in (bundle_tampering({**files, "index.yaml": index}, digest_prefix=stem[1]) or "")
    assert hashlib.sha256(files["index.yaml"].encode()).hexdigest().startswith(stem[1])
    assert bundle_stem("support-bot-bundle-0123456789ab-1") == (
        "support-bot-bundle-0123456789ab",
        "0123456789ab",
    )
    assert bundle_stem("support-bot-config") is None
