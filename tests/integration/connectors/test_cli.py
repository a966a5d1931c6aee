"""The authoring commands as a person runs them: compile, scaffold, regenerate, bundle."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from agent_runtime.connectors import load_tool_defs, load_tool_yaml, resolve_runtime_bundle
from agent_runtime.connectors.__main__ import main
from tests.conftest import REPO_ROOT
from tests.unit.connectors.sample_documents import jira_document


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """In-process (fast); the entry point itself is exercised once as a real process below."""
    out, err = io.StringIO(), io.StringIO()
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(previous)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def test_the_module_runs_as_a_command(tmp_path: Path) -> None:
    (tmp_path / "openapi.json").write_text(json.dumps(jira_document()))
    done = subprocess.run(
        [sys.executable, "-m", "agent_runtime.connectors", "compile", "openapi.json", "--name", "jiradc"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT / "runtime")},
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "tool_defs.yaml").exists()


def test_compile_scaffold_bundle_then_resolve(tmp_path: Path) -> None:
    connector_dir = tmp_path / "connectors" / "jiradc"
    connector_dir.mkdir(parents=True)
    (connector_dir / "openapi.json").write_text(json.dumps(jira_document()))

    compiled = _run("compile", "openapi.json", "--name", "jiradc", "-o", "tool_defs.yaml", cwd=connector_dir)
    assert compiled.returncode == 0, compiled.stderr
    assert "5 tools, 2 skipped" in compiled.stdout and "multipart/form-data" in compiled.stdout

    scaffolded = _run(
        "scaffold", "tool_defs.yaml", "--base-url", "https://jira.example.invalid", cwd=connector_dir
    )
    assert scaffolded.returncode == 0, scaffolded.stderr
    tool = load_tool_yaml(connector_dir / "tool.yaml")
    assert tool.tool_defs == "tool_defs.yaml" and tool.auth is not None and tool.auth.env == "JIRADC_TOKEN"
    again = _run("scaffold", "tool_defs.yaml", cwd=connector_dir)
    assert again.returncode == 2 and "--force" in again.stderr

    (tmp_path / "agent.yaml").write_text(
        yaml.safe_dump({"version": 1, "connectors": [{"source": "connectors/jiradc/tool.yaml"}]})
    )
    bundled = _run("bundle", "agent.yaml", "-o", "bundle", cwd=tmp_path)
    assert bundled.returncode == 0, bundled.stderr
    resolved = resolve_runtime_bundle(
        env={"AGENTIC_CONNECTOR_BUNDLE_PATH": str(tmp_path / "bundle" / "index.yaml")}
    )
    assert resolved.digest in bundled.stdout and resolved.tool_count == 5


def test_regenerate_reports_changes_and_errors_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "v1.json").write_text(json.dumps(jira_document()))
    newer = jira_document()
    newer["paths"]["/new"] = {"get": {"operationId": "newOne"}}
    (tmp_path / "v2.json").write_text(json.dumps(newer))
    assert _run("compile", "v1.json", "--name", "jiradc", cwd=tmp_path).returncode == 0
    regenerated = _run("regenerate", "tool_defs.yaml", "v2.json", cwd=tmp_path)
    assert regenerated.returncode == 0 and "added jiradc_newOne" in regenerated.stdout
    assert any(t.operation_id == "newOne" for t in load_tool_defs(tmp_path / "tool_defs.yaml").tools)
    refused = _run("compile", "https://example.invalid/openapi.yaml", "--name", "x", cwd=tmp_path)
    assert (
        refused.returncode == 2 and "local files only" in refused.stderr and "Traceback" not in refused.stderr
    )
