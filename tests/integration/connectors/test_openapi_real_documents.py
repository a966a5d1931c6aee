"""OpenAPI on real documents (issue 36): multi-segment path parameters, documents with no security
scheme, hashed names told apart by a path word, default headers, and sync/async requests compared byte
for byte on a loopback server that records what arrives on the socket."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_runtime.connectors import (
    ConnectorError,
    ConnectorExecutor,
    ToolArgumentError,
    ToolDefinitions,
    ToolYaml,
    compile_catalog,
    materialize_connector,
)
from agent_runtime.connectors.compile import compile_document
from agent_runtime.connectors.naming import assign_names
from tests.unit.connectors.sample_documents import stripe_spec

pytestmark = pytest.mark.integration

KEY = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"

# GitHub's own parameter definitions (api.github.com.yaml), trimmed to what the compiler reads.
GITHUB_LIKE: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "GitHub v3 REST API (excerpt)", "version": "1.1.4"},
    "servers": [{"url": "https://api.github.com"}],
    "paths": {
        "/repos/{owner}/{repo}/contents/{path}": {
            "get": {
                "operationId": "repos/get-content",
                "parameters": [
                    {"name": "owner", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "repo", "in": "path", "required": True, "schema": {"type": "string"}},
                    {
                        "name": "path",
                        "description": "path parameter",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                        "x-multi-segment": True,
                    },
                    {"name": "ref", "in": "query", "schema": {"type": "string"}},
                ],
            }
        },
        "/repos/{owner}/{repo}/compare/{basehead}": {
            "get": {
                "operationId": "repos/compare-commits",
                "parameters": [
                    {"name": "owner", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "repo", "in": "path", "required": True, "schema": {"type": "string"}},
                    {
                        "name": "basehead",
                        "description": "The base branch and head branch to compare. This parameter expects "
                        "the format `BASE...HEAD`. Both must be branch names in `repo`.",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                ],
            }
        },
        "/repos/{owner}/{repo}/git/ref/{ref}": {
            "get": {
                "operationId": "git/get-ref",
                "parameters": [
                    {"name": "owner", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "repo", "in": "path", "required": True, "schema": {"type": "string"}},
                    {
                        "name": "ref",
                        "description": 'The Git reference. For more information, see "[Git References]'
                        '(https://git-scm.com/book/en/v2/Git-Internals-Git-References)" in the Git '
                        "documentation.",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                        "x-multi-segment": True,
                    },
                ],
            }
        },
        "/repos/{owner}/{repo}/issues/{issue_number}": {
            "delete": {
                "operationId": "issues/remove-all-labels",
                "parameters": [
                    {"name": "owner", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "repo", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "issue_number", "in": "path", "required": True, "schema": {"type": "integer"}},
                ],
            },
            "put": {
                "operationId": "issues/lock",
                "parameters": [
                    {"name": "owner", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "repo", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "issue_number", "in": "path", "required": True, "schema": {"type": "integer"}},
                ],
            },
        },
    },
}


class RawRecorder:
    """A loopback HTTP/1.1 server that keeps each request's bytes exactly as they arrived."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                head, _, rest = data.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + rest)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                    b"Connection: close\r\n\r\n{}"
                )

    def close(self) -> None:
        self._sock.close()


@pytest.fixture(scope="module")
def recorder() -> Iterator[RawRecorder]:
    server = RawRecorder()
    yield server
    server.close()


@pytest.fixture(scope="module")
def stripe() -> ToolDefinitions:
    return compile_catalog(stripe_spec(), connector_name="stripe")


def _github(recorder: RawRecorder, **extra: Any) -> ConnectorExecutor:
    catalog = compile_document(GITHUB_LIKE, connector_name="github")
    tool = ToolYaml.model_validate(
        {"name": "github", "source": {"base_url": recorder.url}, "expose": {"allow": ["*"]}, **extra}
    )
    return ConnectorExecutor(materialize_connector(tool, catalog))


def _both(executor: ConnectorExecutor, recorder: RawRecorder, tool: str, args: dict[str, Any]) -> bytes:
    """The request line and headers as the sync path sent them, asserted identical to the async path's."""
    executor.execute(tool, args, env={"GH_TOKEN": "unused", "STRIPE_KEY": KEY})
    sync_bytes = recorder.requests[-1]
    asyncio.run(executor.aexecute(tool, args, env={"GH_TOKEN": "unused", "STRIPE_KEY": KEY}))
    async_bytes = recorder.requests[-1]
    assert sync_bytes == async_bytes, (sync_bytes, async_bytes)
    return sync_bytes


def _target(raw: bytes) -> str:
    return raw.split(b"\r\n", 1)[0].split(b" ")[1].decode()


def test_marked_and_described_path_parameters_are_multi_segment() -> None:
    catalog = compile_document(GITHUB_LIKE, connector_name="github")
    multi = {(tool.operation_id, p.name) for tool in catalog.tools for p in tool.params if p.multi_segment}
    assert multi == {
        ("repos/get-content", "path"),
        ("repos/compare-commits", "basehead"),
        ("git/get-ref", "ref"),
    }
    # A catalog without any such parameter is written exactly as before (no new key).
    assert "multi_segment" not in compile_catalog(stripe_spec(), connector_name="stripe").dumps()


def test_multi_segment_values_go_out_segment_by_segment(recorder: RawRecorder) -> None:
    with _github(recorder, auth={"type": "none"}) as github:
        raw = _both(
            github,
            recorder,
            "github_repos_get-content",
            {"owner": "octo cat", "repo": "hello/world", "path": "docs/guide/a b#1?.md"},
        )
        # the file path keeps its slashes, each segment encoded; the repo's slash stays %2F
        assert _target(raw) == "/repos/octo%20cat/hello%2Fworld/contents/docs/guide/a%20b%231%3F.md"
        raw = _both(
            github,
            recorder,
            "github_repos_compare-commits",
            {"owner": "o", "repo": "r", "basehead": "main...feature/login"},
        )
        assert _target(raw) == "/repos/o/r/compare/main...feature/login"
        raw = _both(github, recorder, "github_git_get-ref", {"owner": "o", "repo": "r", "ref": "heads/a/b"})
        assert _target(raw) == "/repos/o/r/git/ref/heads/a/b"
        sent = len(recorder.requests)
        for bad in ("../../../orgs/x", "docs/./a", "docs/..", "/etc/passwd", "a//b", "a/"):
            with pytest.raises(ToolArgumentError, match="path argument 'path'"):
                github.execute("github_repos_get-content", {"owner": "o", "repo": "r", "path": bad}, env={})
        # a single-segment parameter given '..' is encoded, never resolved
        raw = _both(github, recorder, "github_issues_lock", {"owner": "..", "repo": "r", "issue_number": 1})
        assert _target(raw) == "/repos/%2E%2E/r/issues/1"
        assert len(recorder.requests) == sent + 2  # the refused ones never reached the server


def test_sync_and_async_send_identical_bytes(recorder: RawRecorder, stripe: ToolDefinitions) -> None:
    with _github(recorder, auth={"type": "bearer", "env": "GH_TOKEN"}) as github:
        put = _both(github, recorder, "github_issues_lock", {"owner": "o", "repo": "r", "issue_number": 7})
        assert b"content-type" not in put.lower() and b"\r\ncontent-length: 0\r\n" in put
        args = {"owner": "o", "repo": "r", "issue_number": 7}
        delete = _both(github, recorder, "github_issues_remove-all-labels", args)
        assert b"content-length" not in delete.lower() and b"accept-encoding" not in delete.lower()
    tool = ToolYaml.model_validate(
        {
            "name": "stripe",
            "source": {"base_url": recorder.url},
            "expose": {"allow": ["PostCustomers", "DeleteCustomersCustomer", "GetCustomers"]},
            "auth": {"type": "bearer", "env": "STRIPE_KEY"},
        }
    )
    with ConnectorExecutor(materialize_connector(tool, stripe)) as executor:
        form = _both(executor, recorder, "stripe_PostCustomers", {"email": "a@b.c", "metadata": {"k": "v w"}})
        assert form.endswith(b"email=a%40b.c&metadata%5Bk%5D=v%20w")
        _both(executor, recorder, "stripe_DeleteCustomersCustomer", {"customer": "cus_1"})
        _both(executor, recorder, "stripe_GetCustomers", {"limit": 3, "expand": ["data.tax"]})


def test_no_security_scheme_needs_auth_none_on_purpose(recorder: RawRecorder) -> None:
    catalog = compile_document(GITHUB_LIKE, connector_name="github")
    bare = ToolYaml.model_validate({"name": "github", "source": {"base_url": recorder.url}})
    with pytest.raises(ConnectorError, match=r"declares no security scheme.*auth: \{type: none\}"):
        materialize_connector(bare, catalog)
    anonymous = ToolYaml.model_validate(
        {"name": "github", "source": {"base_url": recorder.url}, "auth": {"type": "none"}}
    )
    assert materialize_connector(anonymous, catalog).auth is None
    with pytest.raises(ValueError, match="type none sends no credential"):
        ToolYaml.model_validate({"name": "g", "auth": {"type": "none", "env": "GH_TOKEN"}})
    with pytest.raises(ValueError, match="env is required for type bearer"):
        ToolYaml.model_validate({"name": "g", "auth": {"type": "bearer"}})


def test_compile_and_scaffold_say_the_document_declares_no_security(tmp_path: Path) -> None:
    document = tmp_path / "github.json"
    document.write_text(json.dumps(GITHUB_LIKE))
    defs = tmp_path / "tool_defs.yaml"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agent_runtime.connectors", *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )

    out = run("compile", str(document), "--name", "github", "-o", str(defs)).stdout
    assert "declares no security scheme" in out
    out = run("scaffold", str(defs)).stdout
    assert "declares no security scheme" in out and "type: none" in out
    scaffolded = ToolYaml.loads((tmp_path / "tool.yaml").read_text())
    assert scaffolded.auth is not None and scaffolded.auth.type == "none"
    # Stripe declares its schemes: neither command adds the note.
    stripe_doc = tmp_path / "stripe_defs.yaml"
    out = run("compile", str(Path(stripe_spec())), "--name", "stripe", "-o", str(stripe_doc)).stdout
    assert "security scheme" not in out


def test_hashed_names_differ_by_a_path_word(stripe: ToolDefinitions) -> None:
    hashed = [t for t in stripe.tools if re.search(r"_[0-9a-f]{8}$", t.name)]
    stems: dict[str, list[str]] = {}
    for tool in hashed:
        stems.setdefault(tool.name[:-9], []).append(tool.name)
    assert all(len(names) == 1 for names in stems.values()), stems
    # Stripe's three outbound-transfer test helpers: each keeps the word of its own path.
    outbound = sorted(t.name for t in hashed if "OutboundTransfersO" in t.name)
    words = sorted(re.sub(r".*_([a-z]+)_[0-9a-f]{8}$", r"\1", n) for n in outbound)
    assert words == ["fail", "post", "return"]
    # organization vs repository, as GitHub names them
    long = "actions/set-github-actions-default-workflow-permissions-for-the-selected-scope"
    names = assign_names(
        "github",
        [
            ("PUT", "/orgs/{org}/actions/permissions/workflow", long),
            ("PUT", "/repos/{owner}/{repo}/actions/permissions/workflow", long + "-repository"),
        ],
    )
    org, repo = names.values()
    assert "_orgs_" in org and "_repos_" in repo and len(org) <= 64 and len(repo) <= 64
    assert org[:-9] != repo[:-9]


def test_default_headers_are_sent_and_never_a_secret(recorder: RawRecorder) -> None:
    headers = {"X-GitHub-Api-Version": "2022-11-28", "Accept": "application/vnd.github+json"}
    with _github(recorder, auth={"type": "bearer", "env": "GH_TOKEN"}, headers=headers) as github:
        raw = _both(github, recorder, "github_git_get-ref", {"owner": "o", "repo": "r", "ref": "heads/main"})
    assert b"\r\nx-github-api-version: 2022-11-28\r\n" in raw
    assert b"\r\naccept: application/vnd.github+json\r\n" in raw
    refused = {
        "Authorization": "Bearer abc",
        "X-Api-Key": "plain",
        "X-Trace": {"valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        "X-Version": "${GH_TOKEN}",
        "X-Client": "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "X-Build": "q8Zr2VbN4xLp7TcW1mKd9sHf",
        "Cookie": "a=b",
    }
    for name, value in refused.items():
        text = yaml.safe_dump({"name": "github", "auth": {"type": "none"}, "headers": {name: value}})
        with pytest.raises(ConnectorError, match=f"field headers: headers.{name}"):
            ToolYaml.loads(text)
