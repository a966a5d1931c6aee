"""The CRDs in crds/: structural, described, and in step with the operator's models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_operator.models import AgentSpec, ConnectorSpec
from agent_runtime import contract
from tests.unit.operator.specimens import agent_body, connector_body

CRDS = Path(__file__).resolve().parents[3] / "crds"


def _crd(name: str) -> dict[str, Any]:
    return yaml.safe_load((CRDS / f"agentengine.io_{name}.yaml").read_text())


def _walk(schema: dict[str, Any], path: str) -> list[str]:
    """Paths of schema nodes without a description or (structural) without a type."""
    missing = []
    if "description" not in schema:
        missing.append(f"{path}: description")
    if "type" not in schema and not schema.get("x-kubernetes-int-or-string"):
        missing.append(f"{path}: type")
    for key, child in (schema.get("properties") or {}).items():
        if path == "" and key == "metadata":
            continue
        missing += _walk(child, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        missing += _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        missing += _walk(schema["additionalProperties"], f"{path}{{}}")
    return missing


@pytest.mark.parametrize("name", ["agents", "connectors"])
def test_every_field_has_a_type_and_a_description(name: str) -> None:
    crd = _crd(name)
    (version,) = crd["spec"]["versions"]
    assert _walk(version["schema"]["openAPIV3Schema"], "") == []


@pytest.mark.parametrize("name", ["agents", "connectors"])
def test_status_subresource_printer_columns_and_short_names(name: str) -> None:
    crd = _crd(name)
    (version,) = crd["spec"]["versions"]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"] for c in version["additionalPrinterColumns"]}
    assert {"Ready", "Tools", "Age"} <= columns
    assert crd["spec"]["names"]["shortNames"]
    assert crd["spec"]["group"] == "agentengine.io" and version["name"] == "v1alpha1"


def test_spec_fields_match_the_models() -> None:
    agent_props = _crd("agents")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]
    assert set(agent_props) == {f.alias or n for n, f in AgentSpec.model_fields.items()}
    connector_props = _crd("connectors")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"
    ]["properties"]
    assert set(connector_props) == {f.alias or n for n, f in ConnectorSpec.model_fields.items()}


def test_specimens_parse_into_the_models() -> None:
    agent = AgentSpec.model_validate(agent_body()["spec"])
    assert agent.components.aer.replicas == 1 and agent.components.memory.enabled is False
    connector = ConnectorSpec.model_validate(connector_body()["spec"])
    assert connector.auth is not None and connector.auth.env == "PETSTORE_TOKEN"


def test_env_names_refuse_every_platform_prefix_and_the_identity_names() -> None:
    spec = _crd("agents")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    aer = spec["properties"]["components"]["properties"]["aer"]["properties"]
    names = [
        spec["properties"]["llm"]["properties"]["credentials"]["items"]["properties"]["name"],
        aer["env"]["items"]["properties"]["name"],
        aer["secretEnv"]["items"]["properties"]["name"],
    ]
    for name in names:
        rules = " ".join(rule["rule"] for rule in name["x-kubernetes-validations"])
        for prefix in contract.PLATFORM_ENV_PREFIXES:
            assert f"self.startsWith('{prefix}')" in rules
        for reserved in (contract.APP_ID_ENV, contract.REQUIRE_PROJECT_SCOPED_DB_ENV):
            assert f"'{reserved}'" in rules
