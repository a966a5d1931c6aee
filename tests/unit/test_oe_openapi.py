"""The OE's OpenAPI document: the checked-in copy is the generated one, and it is a valid 3.1 document
whose schemas are the handlers' own models."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from agent_runtime.protocol import InvokeRequest
from agent_runtime.servers.oe_openapi import OPERATIONS, openapi_document, openapi_json
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit
CHECKED_IN = REPO_ROOT / "docs" / "oe-openapi.json"


def test_the_checked_in_document_is_the_generated_one() -> None:
    assert CHECKED_IN.read_text() == openapi_json(), (
        "docs/oe-openapi.json drifted from the OE's models: regenerate it with "
        "`python -m agent_runtime.servers.oe_openapi > docs/oe-openapi.json`"
    )


def test_every_schema_is_valid_json_schema_and_every_ref_resolves() -> None:
    document = openapi_document()
    assert document["openapi"].startswith("3.1")
    schemas = document["components"]["schemas"]
    for schema in schemas.values():
        Draft202012Validator.check_schema(schema)
    text = json.dumps(document)
    for name in {part.split('"')[0] for part in text.split("#/components/schemas/")[1:]}:
        assert name in schemas, name
    assert {op.operation_id for op in OPERATIONS} == {
        entry["operationId"] for methods in document["paths"].values() for entry in methods.values()
    }


def test_the_invoke_body_is_the_model_the_handler_parses() -> None:
    schema = openapi_document()["components"]["schemas"]["InvokeRequest"]
    assert schema == InvokeRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    assert schema["required"] == ["agent"] and schema["properties"]["agent"]["pattern"]
