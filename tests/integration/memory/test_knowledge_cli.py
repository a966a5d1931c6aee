"""`agentengine knowledge add|list|forget` as a process, against a Memory server started by the launcher."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.integration.memory.launched import TOKEN, MemoryServer, memory_process


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryServer]:
    with memory_process(tmp_path_factory.mktemp("kb-cli"), app_id="team-a.cli") as running:
        yield running


def agentengine(
    server: MemoryServer, tmp_path: Path, *args: str, token: str = TOKEN, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    token_file = tmp_path / "runtime-token"
    token_file.write_text(token)
    return subprocess.run(
        [sys.executable, "-m", "agent_runtime.cli", "knowledge", "--memory-url", server.base_url,
         "--token-file", str(token_file), *args],
        capture_output=True, text=True, input=stdin, timeout=120, cwd=REPO_ROOT, check=False,
    )  # fmt: skip


def test_add_list_replace_forget(server: MemoryServer, tmp_path: Path) -> None:
    doc = tmp_path / "faq.md"
    doc.write_text("# FAQ\n\n## Wifi\n\nThe guest wifi password is printed on the badge.")
    added = agentengine(server, tmp_path, "add", str(doc), "--meta", "team=front-desk", "-o", "json")
    assert added.returncode == 0, added.stderr
    (answer,) = json.loads(added.stdout)["documents"]
    assert answer["source"] == "faq.md" and answer["status"] == "created" and answer["chunks"] == 1
    with server.client() as http:
        query = {"query": "guest internet", "filter": {"team": "front-desk"}}
        hits = http.post("/knowledge/search", json=query)
    assert hits.json()["results"][0]["metadata"] == {"origin": "cli", "team": "front-desk"}

    args = ("add", "-", "--source", "faq.md", "--meta", "team=front-desk", "-o", "json")
    piped = agentengine(server, tmp_path, *args, stdin="# FAQ\n\nNo wifi.")
    assert piped.returncode == 0, piped.stderr
    listed = agentengine(server, tmp_path, "list", "-o", "json")
    sources = json.loads(listed.stdout)["sources"]
    assert [(s["source"], s["chunks"]) for s in sources] == [("faq.md", 1)]
    table = agentengine(server, tmp_path, "list")
    assert "faq.md" in table.stdout and "SOURCE" in table.stdout

    forgotten = agentengine(server, tmp_path, "forget", "faq.md")
    assert forgotten.returncode == 0 and "1 chunks removed" in forgotten.stdout
    assert json.loads(agentengine(server, tmp_path, "list", "-o", "json").stdout)["sources"] == []


def test_errors_name_the_fix_and_never_the_token(server: MemoryServer, tmp_path: Path) -> None:
    empty = tmp_path / "empty.md"
    empty.write_text("   ")
    refused = agentengine(server, tmp_path, "add", str(empty))
    assert refused.returncode == 2 and "text" in refused.stderr and refused.stderr.startswith("error: ")
    wrong = "wrong-runtime-token-7f3a9c"
    denied = agentengine(server, tmp_path, "list", token=wrong)
    assert denied.returncode == 4 and "refused the runtime token" in denied.stderr
    assert wrong not in denied.stderr + denied.stdout
    nourl = subprocess.run(
        [sys.executable, "-m", "agent_runtime.cli", "knowledge", "list"],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    assert nourl.returncode == 2 and "--memory-url" in nourl.stderr
