"""tool.yaml: scaffold, materialize, regenerate; secrets only ever named, never stored."""

from __future__ import annotations

import pytest

from agent_runtime.connectors import (
    ConnectorError,
    ToolYaml,
    compile_catalog,
    materialize_connector,
    regenerate_catalog,
    scaffold_tool_yaml,
)
from tests.unit.connectors.sample_documents import jira_document


def _catalog():
    return compile_catalog(jira_document(), connector_name="jiradc")


def test_scaffold_has_the_documented_shape() -> None:
    tool = scaffold_tool_yaml(_catalog(), base_url="https://jira.example.invalid")
    text = tool.dumps()
    assert ToolYaml.loads(text) == tool
    assert list(tool.model_dump(exclude_none=True)) == ["name", "tool_defs", "source", "expose", "auth"]
    assert tool.source.type == "openapi" and tool.source.base_url == "https://jira.example.invalid"
    assert "getComments" in tool.expose.allow
    assert tool.auth is not None and (tool.auth.type, tool.auth.env) == ("bearer", "JIRADC_TOKEN")


def test_materialize_selects_binds_and_keeps_catalog_order() -> None:
    tool = ToolYaml(
        name="jiradc",
        source={"base_url": "https://jira.example.invalid/rest"},
        expose={"allow": ["addComment", "jiradc_getComments"]},
        auth={"type": "api_key", "env": "JIRA_KEY"},
    )
    connector = materialize_connector(tool, _catalog())
    assert [t.name for t in connector.tools] == ["jiradc_getComments", "jiradc_addComment"]
    assert connector.source.base_url == "https://jira.example.invalid/rest"
    assert connector.auth is not None
    assert (connector.auth.type, connector.auth.location, connector.auth.name, connector.auth.env) == (
        "api_key",
        "header",
        "X-Api-Key",
        "JIRA_KEY",
    )


def test_allow_entry_naming_no_operation_is_an_error_naming_it() -> None:
    tool = ToolYaml(
        name="jiradc", source={"base_url": "https://j.invalid"}, expose={"allow": ["upload", "nope"]}
    )
    with pytest.raises(ConnectorError, match=r"'upload'.*multipart"):
        materialize_connector(tool, _catalog())


def test_a_renamed_connector_renames_its_tools() -> None:
    tool = ToolYaml(name="jira2", source={"base_url": "https://j.invalid"}, expose={"allow": ["*"]})
    names = [t.name for t in materialize_connector(tool, _catalog()).tools]
    assert "jira2_getComments" in names and all(n.startswith("jira2_") for n in names)


def test_path_credential_leaves_the_agent_facing_schema() -> None:
    tool = ToolYaml(
        name="jiradc",
        source={"base_url": "https://j.invalid"},
        expose={"allow": ["getComments"]},
        auth={"type": "path", "env": "T", "name": "issueIdOrKey"},
    )
    spec = materialize_connector(tool, _catalog()).tools[0]
    assert "issueIdOrKey" not in spec.input_schema["properties"]
    assert "issueIdOrKey" not in spec.input_schema["required"]


def test_tool_yaml_refuses_secret_values_urls_and_bad_env_names() -> None:
    with pytest.raises(ConnectorError, match=r"auth\.token"):
        ToolYaml.loads("name: x\nauth: {type: bearer, env: X, token: sk_live_abc}\n")
    with pytest.raises(ConnectorError, match=r"auth\.env.*environment variable"):
        ToolYaml.loads("name: x\nauth: {type: bearer, env: 'sk live abc'}\n")
    with pytest.raises(ConnectorError, match="local files only"):
        ToolYaml.loads("name: x\ntool_defs: https://example.invalid/defs.yaml\n")
    with pytest.raises(ConnectorError, match=r"source\.base_url"):
        ToolYaml.loads("name: x\nsource: {base_url: 'ftp://x'}\n")


def test_missing_base_url_is_an_error_at_materialization() -> None:
    tool = ToolYaml(name="jiradc", expose={"allow": ["getComments"]})
    with pytest.raises(ConnectorError, match="base_url is required"):
        materialize_connector(tool, _catalog())


def test_regenerate_keeps_names_and_reports_changes() -> None:
    existing = _catalog()
    newer = jira_document()
    del newer["paths"]["/upload"]
    del newer["paths"]["/tree"]["post"]
    newer["paths"]["/issue/{issueIdOrKey}/comment"]["get"]["summary"] = "Get the comments"
    newer["paths"]["/new"] = {"get": {"operationId": "newOne"}}
    regenerated, changes = regenerate_catalog(existing, newer)
    assert changes.added == ["jiradc_newOne"]
    assert changes.removed == ["jiradc_postShape"]
    assert changes.changed == ["jiradc_getComments"]
    kept = {t.name for t in existing.tools} - {"jiradc_postShape"}
    assert kept <= {t.name for t in regenerated.tools}


def test_regenerate_keeps_the_name_when_only_the_operation_id_changed() -> None:
    existing = _catalog()
    newer = jira_document()
    newer["paths"]["/issue/{issueIdOrKey}/comment"]["get"]["operationId"] = "listComments"
    regenerated, changes = regenerate_catalog(existing, newer)
    renamed = next(t for t in regenerated.tools if t.operation_id == "listComments")
    assert renamed.name == "jiradc_getComments"
    assert changes.changed == ["jiradc_getComments"] and changes.added == [] and changes.removed == []
