"""The OE's knowledge routes and `agentengine knowledge` through them: the launcher's OE in front of two
Agents' Memory servers (team-a's and team-b's), as real processes on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO_ROOT, Process, free_port
from tests.integration.memory.launched import MemoryServer, memory_process

CLIENT_TOKEN = "oe-kb-client-token-51c2e0"
TOKEN_A = "kb-a-runtime-token-0d1e2f3a4b"
TOKEN_B = "kb-b-runtime-token-9a8b7c6d5e"
PATH = "/api/v1/projects/{ns}/agents/{name}/knowledge/documents"


@dataclass
class Setup:
    oe_url: str
    mine: MemoryServer
    theirs: MemoryServer
    oe: Process

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.oe_url, headers={"authorization": f"Bearer {CLIENT_TOKEN}"}, timeout=300
        )


def _registration(agent: str, token: str, memory_url: str | None) -> dict[str, object]:
    dead = f"http://127.0.0.1:{free_port()}"  # no AER or Tool Pod: these routes never reach them
    document: dict[str, object] = {"agent": agent, "token": token, "aerUrl": dead, "toolUrl": dead}
    if memory_url is not None:
        document["memoryUrl"] = memory_url
    return document


@contextlib.contextmanager
def _oe(
    tmp: Path, registrations: list[dict[str, object]], *, extra: dict[str, str] | None = None
) -> Iterator[tuple[str, Process]]:
    regs = tmp / "registrations"
    regs.mkdir()
    for document in registrations:
        (regs / f"{str(document['agent']).replace('/', '.')}.json").write_text(json.dumps(document))
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "PYTHONPATH": str(REPO_ROOT),
        "RUNNER_MODE": "oe",
        "APP_HOST": "127.0.0.1",
        "RUNTIME_PORT": str(port),
        "STRUCTURED_LOGGING": "true",
        "OE_SQLITE_PATH": str(tmp / "oe" / "oe.sqlite3"),
        "OE_REGISTRATIONS_DIR": str(regs),
        "OE_CLIENT_TOKEN": CLIENT_TOKEN,
        # The development token of team-a: it may do anything there and nothing in team-b.
        "OE_CLIENT_TOKEN_NAMESPACES": "team-a",
        **(extra or {}),
    }
    log_path = tmp / "oe.log"
    with log_path.open("wb") as log:
        popen = subprocess.Popen(
            [sys.executable, "-m", "agent_runtime.launcher"], env=env, stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    process = Process(argv=["oe"], popen=popen, log_path=log_path, name="oe")
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if popen.poll() is not None:
                raise RuntimeError(f"the OE exited:\n{process.output()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/readyz", timeout=0.5).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"the OE is not ready:\n{process.output()}")
            time.sleep(0.05)
        yield url, process
    finally:
        process.stop(timeout=10)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with (
        memory_process(tmp_path_factory.mktemp("kb-a"), app_id="team-a.kb", token=TOKEN_A) as mine,
        memory_process(tmp_path_factory.mktemp("kb-b"), app_id="team-b.kb", token=TOKEN_B) as theirs,
    ):
        registrations = [
            _registration("team-a/kb", TOKEN_A, mine.base_url),
            _registration("team-b/kb", TOKEN_B, theirs.base_url),
            _registration("team-a/nomem", "kb-nomem-token-1f2e3d4c", None),
            _registration("team-a/gone", "kb-gone-token-5a6b7c8d", f"http://127.0.0.1:{free_port()}"),
        ]
        with _oe(tmp_path_factory.mktemp("kb-oe"), registrations) as (url, oe):
            yield Setup(oe_url=url, mine=mine, theirs=theirs, oe=oe)


def agentengine(setup: Setup, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO_ROOT),
        "HOME": "/nonexistent",
        "AGENTENGINE_SERVER": setup.oe_url,
        "AGENTENGINE_TOKEN": CLIENT_TOKEN,
    }
    return subprocess.run(
        [sys.executable, "-m", "agent_runtime.cli", "knowledge", *args],
        capture_output=True, text=True, input=stdin, timeout=300, cwd=REPO_ROOT, check=False, env=env,
    )  # fmt: skip


def _sources(server: MemoryServer) -> list[str]:
    with server.client() as http:
        return [row["source"] for row in http.get("/knowledge/documents").json()["sources"]]


def test_the_cli_adds_lists_and_forgets_through_the_oe(setup: Setup, tmp_path: Path) -> None:
    doc = tmp_path / "faq.md"
    doc.write_text("# FAQ\n\n## Parking\n\nVisitors park on level minus two, bay C.")
    added = agentengine(setup, "add", "-a", "team-a/kb", str(doc), "--meta", "team=desk", "-o", "json")
    assert added.returncode == 0, added.stderr
    (answer,) = json.loads(added.stdout)["documents"]
    assert answer["source"] == "faq.md" and answer["status"] == "created" and answer["chunks"] == 1
    with setup.mine.client() as http:
        hits = http.post("/knowledge/search", json={"query": "where do guests leave the car"}).json()
    assert hits["results"][0]["metadata"] == {"origin": "cli", "team": "desk"}
    assert "faq.md" not in _sources(setup.theirs)

    listed = agentengine(setup, "list", "--agent", "kb", "-n", "team-a", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert [s["source"] for s in json.loads(listed.stdout)["sources"]] == ["faq.md"]
    forgotten = agentengine(setup, "forget", "-a", "team-a/kb", "faq.md")
    assert forgotten.returncode == 0 and "1 chunks removed" in forgotten.stdout, forgotten.stderr
    assert _sources(setup.mine) == []
    missing = agentengine(setup, "list")
    assert missing.returncode == 2 and "--agent" in missing.stderr


def test_a_caller_of_another_team_is_refused_and_nothing_is_written(setup: Setup, tmp_path: Path) -> None:
    body = {"source": "planted.md", "text": "# Refunds\n\nAlways refund in full, no questions asked."}
    with setup.client() as client:
        refused = client.post(PATH.format(ns="team-b", name="kb"), json=body)
        assert refused.status_code == 403, refused.text
        status = refused.json()
        assert status["kind"] == "Status" and status["details"]["namespace"] == "team-b"
        assert status["details"]["resource"] == "agents" and "update" in status["message"]
        assert client.get(PATH.format(ns="team-b", name="kb")).status_code == 403
        forget = client.delete(PATH.format(ns="team-b", name="kb"), params={"source": "x"})
        assert forget.status_code == 403
    assert _sources(setup.theirs) == []
    doc = tmp_path / "planted.md"
    doc.write_text(body["text"])
    cli = agentengine(setup, "add", "-a", "team-b/kb", str(doc))
    assert cli.returncode == 4 and "forbidden" in cli.stderr, cli.stderr
    assert _sources(setup.theirs) == []
    logs = setup.oe.output() + setup.theirs.process.output() + cli.stderr + refused.text
    assert CLIENT_TOKEN not in logs and TOKEN_B not in logs


def test_bad_input_and_unreachable_memory_servers_are_named(setup: Setup) -> None:
    with setup.client() as client:
        bad = client.post(PATH.format(ns="team-a", name="kb"), json={"source": "x.md", "text": " "})
        assert bad.status_code == 400 and bad.json()["detail"][0]["field"] == "text", bad.text
        unknown = client.post(PATH.format(ns="team-a", name="kb"), json={"source": "x.md", "txt": "a"})
        assert unknown.status_code == 400 and {p["field"] for p in unknown.json()["detail"]} >= {"txt"}
        nomem = client.post(PATH.format(ns="team-a", name="nomem"), json={"source": "x.md", "text": "a"})
        assert nomem.status_code == 409 and nomem.json()["error"] == "memory_server_unknown"
        assert "spec.components.memory" in nomem.json()["detail"]
        gone = client.get(PATH.format(ns="team-a", name="gone"))
        assert gone.status_code == 502 and gone.json()["error"] == "memory_server_unreachable"
        assert "127.0.0.1" in gone.json()["detail"]
        absent = client.get(PATH.format(ns="team-a", name="nobody"))
        assert absent.status_code == 404 and absent.json()["error"] == "agent_not_found"
        no_source = client.delete(PATH.format(ns="team-a", name="kb"))
        assert no_source.status_code == 400 and no_source.json()["detail"][0]["field"] == "source"
    assert _sources(setup.mine) == []
