"""compile_catalog on small documents: names, envelopes, bodies, refs, skips, security."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
import yaml

from agent_runtime.connectors import ConnectorError, compile_catalog, load_catalog_text
from agent_runtime.connectors.naming import MAX_TOOL_NAME, tool_name
from tests.unit.connectors.sample_documents import jira_document


def _tool(catalog, operation_id):
    return next(t for t in catalog.tools if t.operation_id == operation_id)


def test_tool_names_are_connector_plus_operation_id() -> None:
    catalog = compile_catalog(jira_document(), connector_name="jiradc")
    names = {t.name for t in catalog.tools}
    assert {"jiradc_getComments", "jiradc_addComment", "jiradc_updateItem", "jiradc_put_tree"} <= names


def test_envelope_has_only_type_properties_required() -> None:
    catalog = compile_catalog(jira_document(), connector_name="jiradc")
    for tool in catalog.tools:
        assert set(tool.input_schema) == {"type", "properties", "required"}
        assert tool.input_schema["type"] == "object"


def test_parameters_map_into_the_envelope_and_reserved_headers_are_ignored() -> None:
    tool = _tool(compile_catalog(jira_document(), connector_name="jiradc"), "getComments")
    assert list(tool.input_schema["properties"]) == ["issueIdOrKey", "startAt", "expand"]
    assert tool.input_schema["required"] == ["issueIdOrKey", "expand"]
    assert tool.description == "Get comments\n\nReturns all comments for an issue."


def test_plain_object_body_maps_properties_in_with_refs_inlined_and_nullable_translated() -> None:
    tool = _tool(compile_catalog(jira_document(), connector_name="jiradc"), "addComment")
    props = tool.input_schema["properties"]
    assert list(props) == ["issueIdOrKey", "body", "visibility", "author"]
    assert tool.input_schema["required"] == ["issueIdOrKey", "body"]
    assert props["body"] == {"type": "string", "description": "The text."}
    assert props["visibility"]["type"] == ["object", "null"]
    assert (
        tool.body is not None
        and tool.body.arg is None
        and tool.body.properties == ["body", "visibility", "author"]
    )
    assert "$ref" not in json.dumps(tool.input_schema)


def test_recursive_schemas_terminate() -> None:
    catalog = compile_catalog(jira_document(), connector_name="jiradc")
    tree = next(t for t in catalog.tools if t.method == "PUT" and t.path == "/tree")
    children = tree.input_schema["properties"]["children"]
    assert children["items"]["description"] == "(recursive: Tree)"
    manager = _tool(catalog, "addComment").input_schema["properties"]["author"]
    assert "recursive: User" in json.dumps(manager)


def test_non_object_body_is_wrapped_with_full_json_schema() -> None:
    tool = _tool(compile_catalog(jira_document(), connector_name="jiradc"), "postShape")
    assert tool.body is not None and tool.body.arg == "body"
    assert tool.input_schema["required"] == ["body"]
    shape = tool.input_schema["properties"]["body"]
    assert shape["oneOf"][1] == {"type": ["string", "null"]}


def test_body_colliding_with_a_parameter_is_wrapped() -> None:
    tool = _tool(compile_catalog(jira_document(), connector_name="jiradc"), "updateItem")
    assert tool.body is not None and tool.body.arg == "body"
    assert tool.body.media_type == "application/x-www-form-urlencoded"
    assert set(tool.input_schema["properties"]) == {"id", "body"}


def test_unsupported_operations_are_skipped_with_reasons() -> None:
    catalog = compile_catalog(jira_document(), connector_name="jiradc")
    reasons = {s.operation_id: s.reason for s in catalog.skipped}
    assert "multipart/form-data" in reasons["upload"]
    assert "'content'" in reasons["filter"]
    assert len(catalog.tools) + len(catalog.skipped) == 7


def test_security_schemes_become_presentations_and_servers_only_suggest() -> None:
    catalog = compile_catalog(jira_document(), connector_name="jiradc")
    assert catalog.auth is not None and catalog.auth.type == "bearer"
    assert [(o.type, o.location, o.name) for o in catalog.auth_options] == [
        ("bearer", None, None),
        ("api_key", "header", "X-Api-Key"),
    ]
    assert catalog.source.base_url == "https://jira.invalid/rest/api/2"
    assert "elsewhere" not in catalog.dumps()


def test_external_refs_are_refused() -> None:
    document = jira_document()
    document["components"]["schemas"]["Comment"]["properties"]["x"] = {"$ref": "https://evil.invalid/s.json"}
    with pytest.raises(ConnectorError, match="points outside this document"):
        compile_catalog(document, connector_name="jiradc")


def test_external_refs_in_parameters_refuse_the_document_too() -> None:
    document = jira_document()
    params = document["paths"]["/issue/{issueIdOrKey}/comment"]["get"]["parameters"]
    params[0]["schema"] = {"$ref": "other.yaml#/components/schemas/X"}
    with pytest.raises(ConnectorError, match="only local references"):
        compile_catalog(document, connector_name="jiradc")
    params[0] = {"$ref": "https://evil.invalid/param.json"}
    with pytest.raises(ConnectorError, match="points outside"):
        compile_catalog(document, connector_name="jiradc")


def test_urls_are_refused_where_a_file_is_expected() -> None:
    with pytest.raises(ConnectorError, match="reads local files only"):
        compile_catalog("https://example.invalid/openapi.yaml", connector_name="x")


def test_swagger_2_and_missing_version_are_refused_with_the_fix() -> None:
    with pytest.raises(ConnectorError, match=r"convert it to OpenAPI 3\.0"):
        compile_catalog({"swagger": "2.0", "paths": {}}, connector_name="x")
    with pytest.raises(ConnectorError, match=r"OpenAPI 3\.0\.x"):
        compile_catalog({"paths": {}}, connector_name="x")


def test_bad_connector_name_is_refused() -> None:
    with pytest.raises(ConnectorError, match="connector_name"):
        compile_catalog(jira_document(), connector_name="no spaces")


def test_yaml_file_and_text_compile_the_same(tmp_path: Path) -> None:
    path = tmp_path / "openapi.yaml"
    path.write_text(yaml.safe_dump(jira_document()))
    from_file = compile_catalog(path, connector_name="jiradc")
    from_text = load_catalog_text(path.read_text(), connector_name="jiradc")
    assert from_file.tools == from_text.tools
    assert from_file.provenance.document_sha256 is not None


def test_load_catalog_text_detects_a_compiled_catalog() -> None:
    catalog = compile_catalog(jira_document(), connector_name="jiradc")
    assert load_catalog_text(catalog.dumps(), connector_name="jiradc") == catalog


def test_yaml_timestamps_in_schemas_skip_the_operation_naming_the_path() -> None:
    document = jira_document()
    params = document["paths"]["/issue/{issueIdOrKey}/comment"]["get"]["parameters"]
    params[0]["schema"]["default"] = datetime.date(2020, 1, 2)
    catalog = compile_catalog(document, connector_name="jiradc")
    reason = next(s.reason for s in catalog.skipped if s.operation_id == "getComments")
    assert "properties/startAt/default" in reason


def test_long_names_are_truncated_stably_and_collisions_are_deterministic() -> None:
    long_id = "a" * 80
    name = tool_name("stripe", long_id)
    assert len(name) == MAX_TOOL_NAME and name == tool_name("stripe", long_id)
    document = {
        "openapi": "3.0.0",
        "paths": {
            "/a": {"get": {"operationId": "get.thing"}},
            "/b": {"get": {"operationId": "get thing"}},
        },
    }
    first = [t.name for t in compile_catalog(document, connector_name="c").tools]
    again = [t.name for t in compile_catalog(document, connector_name="c").tools]
    assert first == again
    assert first[0] == "c_get_thing" and first[1].startswith("c_get_thing_") and len(set(first)) == 2


def test_descriptions_lose_html_formatting_and_are_bounded() -> None:
    document = jira_document()
    operation = document["paths"]["/issue/{issueIdOrKey}/comment"]["get"]
    operation["summary"] = ""
    operation["description"] = "<p>Lists <code>comments</code>.</p><p>Use <api_key>.</p>" + " word" * 1000
    tool = _tool(compile_catalog(document, connector_name="jiradc"), "getComments")
    assert tool.description.startswith("Lists comments.\nUse <api_key>.")
    assert len(tool.description) <= 1024 and tool.description.endswith("…")


def test_undeclared_path_template_variables_become_required_arguments() -> None:
    document = {"openapi": "3.0.1", "paths": {"/orgs/{org}/repos": {"get": {"operationId": "listRepos"}}}}
    tool = compile_catalog(document, connector_name="gh").tools[0]
    assert tool.input_schema["properties"] == {"org": {"type": "string"}}
    assert tool.input_schema["required"] == ["org"]


def test_malformed_operations_are_skipped_never_a_crash() -> None:
    chain = {f"S{i}": {"$ref": f"#/components/schemas/S{i + 1}"} for i in range(500)}
    chain["S500"] = {"type": "string"}
    document = {
        "openapi": "3.0.3",
        "components": {"schemas": chain},
        "paths": {
            "/a": {
                "get": {"operationId": "listParams", "parameters": [1, 2]},
                "post": {"operationId": "stringBody", "requestBody": "nope"},
                "put": {"operationId": "listContent", "requestBody": {"content": ["application/json"]}},
                "patch": {
                    "operationId": "badSchema",
                    "parameters": [{"name": "q", "in": "query", "schema": []}],
                },
            },
            "/b": {
                "get": {
                    "operationId": "longChain",
                    "parameters": [
                        {"name": "q", "in": "query", "schema": {"$ref": "#/components/schemas/S0"}}
                    ],
                }
            },
            "/c": "not a path item",
        },
    }
    catalog = compile_catalog(document, connector_name="bad")
    accounted = {t.operation_id for t in catalog.tools} | {s.operation_id for s in catalog.skipped}
    assert accounted == {"listParams", "stringBody", "listContent", "badSchema", "longChain"}
    chained = next(t for t in catalog.tools if t.operation_id == "longChain")
    assert "truncated" in json.dumps(chained.input_schema)
