"""Bundles: deterministic build, write/read, containment; runtime resolution order."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from agent_runtime.connectors import (
    BUNDLE_INDEX,
    ConnectorError,
    ToolYaml,
    build_bundle,
    bundle_from_agent_config,
    compile_catalog,
    materialize_connector,
    resolve_runtime_bundle,
    write_bundle,
)
from tests.unit.connectors.sample_documents import jira_document


def _connector(name: str = "jiradc"):
    catalog = compile_catalog(jira_document(), connector_name=name)
    tool = ToolYaml(name=name, source={"base_url": "https://j.invalid"}, expose={"allow": ["*"]})
    return materialize_connector(tool, catalog)


def test_same_inputs_same_bytes_and_digest_and_flat_names() -> None:
    one = build_bundle([_connector("b"), _connector("a")])
    two = build_bundle([_connector("a"), _connector("b")])
    assert one.files == two.files and one.digest == two.digest
    assert set(one.files) == {BUNDLE_INDEX, "a.yaml", "b.yaml"}
    assert one.tool_count == 10
    assert build_bundle([_connector("a")]).digest != one.digest


def test_duplicate_connector_names_are_refused() -> None:
    with pytest.raises(ConnectorError, match="unique name"):
        build_bundle([_connector(), _connector()])


def test_resolve_reads_exactly_what_write_bundle_wrote(tmp_path: Path) -> None:
    bundle = build_bundle([_connector()])
    index = write_bundle(bundle, tmp_path / "bundle")
    resolved = resolve_runtime_bundle(env={"AGENTIC_CONNECTOR_BUNDLE_PATH": str(index)})
    assert resolved.digest == bundle.digest
    assert resolved.connectors == [_connector()]


@pytest.mark.parametrize("bad", ["../outside.yaml", "/etc/passwd", "link.yaml"])
def test_bundle_paths_that_leave_the_directory_are_refused(tmp_path: Path, bad: str) -> None:
    bundle_dir = tmp_path / "bundle"
    index = write_bundle(build_bundle([_connector()]), bundle_dir)
    (tmp_path / "outside.yaml").write_bytes((bundle_dir / "jiradc.yaml").read_bytes())
    os.symlink(tmp_path / "outside.yaml", bundle_dir / "link.yaml")
    index.write_text(index.read_text().replace('"jiradc.yaml"', f'"{bad}"'))
    with pytest.raises(ConnectorError, match="inside"):
        resolve_runtime_bundle(env={"AGENTIC_CONNECTOR_BUNDLE_PATH": str(index)})


def _workspace(tmp_path: Path, *, allow: str = "[getComments]", catalog_ref: str = "openapi.yaml") -> Path:
    import yaml

    tool_dir = tmp_path / "agent" / "connectors" / "jiradc"
    tool_dir.mkdir(parents=True)
    (tool_dir / "openapi.yaml").write_text(yaml.safe_dump(jira_document()))
    (tool_dir / "tool.yaml").write_text(
        f"name: jiradc\ntool_defs: {catalog_ref}\nsource: {{type: openapi, base_url: 'https://j.invalid'}}\n"
        f"expose: {{allow: {allow}}}\nauth: {{type: bearer, env: JIRA_TOKEN}}\n"
    )
    agent = tmp_path / "agent" / "agent.yaml"
    agent.write_text(
        "version: 1\nentrypoint: app:main\nconnectors:\n  - source: connectors/jiradc/tool.yaml\n"
    )
    return agent


def test_agent_yaml_connectors_are_materialized_in_memory(tmp_path: Path) -> None:
    agent = _workspace(tmp_path)
    resolved = resolve_runtime_bundle(env={"AGENT_CONFIG_PATH": str(agent)})
    assert [t.name for t in resolved.connectors[0].tools] == ["jiradc_getComments"]
    assert resolved.connectors[0].auth is not None and resolved.connectors[0].auth.env == "JIRA_TOKEN"
    # the operator's path: the same inputs give the same bundle bytes and digest
    assert bundle_from_agent_config(agent).digest == resolved.digest
    assert resolve_runtime_bundle(env={}, agent_config=agent).digest == resolved.digest


def test_agent_yaml_errors_name_the_entry(tmp_path: Path) -> None:
    agent = _workspace(tmp_path, allow="[nope]")
    with pytest.raises(ConnectorError, match="'nope'"):
        resolve_runtime_bundle(env={"AGENT_CONFIG_PATH": str(agent)})


def test_catalog_outside_the_workspace_is_refused(tmp_path: Path) -> None:
    agent = _workspace(tmp_path, catalog_ref="../../../secret.yaml")
    (tmp_path / "secret.yaml").write_text("openapi: 3.0.0\npaths: {}\n")
    with pytest.raises(ConnectorError, match=r"'\.\.'|outside"):
        resolve_runtime_bundle(env={"AGENT_CONFIG_PATH": str(agent)})


_AUDITED: list[str] = []
_AUDITING = threading.Event()
_IO_EVENTS = (
    "open",
    "os.listdir",
    "os.scandir",
    "os.stat",
    "socket.connect",
    "socket.getaddrinfo",
    "subprocess",
)


def _audit(event: str, args: object) -> None:
    if _AUDITING.is_set() and event.startswith(_IO_EVENTS):
        _AUDITED.append(event)


sys.addaudithook(_audit)  # hooks cannot be removed; this one only records while the event is set


def test_nothing_configured_touches_neither_files_nor_network() -> None:
    resolve_runtime_bundle(env={})  # warm: first calls may import lazily
    _AUDITED.clear()
    _AUDITING.set()
    try:
        resolved = resolve_runtime_bundle(env={"UNRELATED": "1"})
    finally:
        _AUDITING.clear()
    assert _AUDITED == []
    assert resolved.connectors == [] and resolved.tool_count == 0
    assert resolved.digest == build_bundle([]).digest
