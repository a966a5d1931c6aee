"""`make run`'s approval at a terminal (agent_runtime.demo), against `agentengine dev examples/echo-agent`
with the demo's own model script: a person edits the held arguments in $EDITOR (a scripted editor) and the
tool runs with them; a person rejects and the agent goes on without it. Without a terminal it approves."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from agent_runtime.demo.platform import DEMO_SCRIPT
from agent_runtime.devloop.children import free_port
from tests.conftest import REPO_ROOT
from tests.integration.devloop.session import DevSession, cli_env

pytestmark = pytest.mark.integration

EDITED = "edited by a person"


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevSession]:
    script = tmp_path_factory.mktemp("script") / "demo.json"
    script.write_text(json.dumps([turn.model_dump(exclude_none=True) for turn in DEMO_SCRIPT]))
    session = DevSession.start(
        REPO_ROOT / "examples" / "echo-agent", "--model", f"scripted:{script}", port=free_port()
    )
    yield session
    session.close()


def _demo_argv(dev: DevSession) -> list[str]:
    code = (
        "import sys; from agent_runtime.demo.__main__ import demo; "
        f"sys.exit(demo(server={dev.oe_url!r}, token={dev.token!r}, agent={dev.agent!r}))"
    )
    return [sys.executable, "-c", code]


def test_at_a_terminal_the_person_edits_the_held_arguments(dev: DevSession, tmp_path: Path) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text(f"#!/bin/sh\nsed -i 's/hello brave new world/{EDITED}/' \"$1\"\n")
    editor.chmod(0o755)
    argv = _demo_argv(dev)
    child = pexpect.spawn(
        argv[0], argv[1:], env=cli_env(EDITOR=str(editor), VISUAL=str(editor)), encoding="utf-8", timeout=90
    )
    child.expect(r"Approval needed: sign_message\(\{\"message\": \"hello brave new world\"\}\)")
    child.expect(r"Approve, reject, or edit the arguments first\?")
    child.sendline("edit")
    child.expect(r"Answer: ")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    with dev.client() as client:
        (newest,) = client.executions(project="dev", agent=dev.agent, limit=1)["items"]
        audit = client.audit(newest["execution_id"])
    executed = [r for r in audit if r.get("tool") == "sign_message" and r.get("route") == "tool_pod"]
    assert [r["args"] for r in executed] == [
        {"requested": {"message": "hello brave new world"}, "executed": {"message": EDITED}}
    ], audit


def test_at_a_terminal_the_person_rejects(dev: DevSession) -> None:
    argv = _demo_argv(dev)
    child = pexpect.spawn(argv[0], argv[1:], env=cli_env(), encoding="utf-8", timeout=90)
    child.expect(r"Approve, reject, or edit the arguments first\?")
    child.sendline("reject")
    child.expect(r"Why \(the agent sees this\)")
    child.sendline("not today")
    child.expect(pexpect.EOF)
    child.close()
    with dev.client() as client:
        (newest,) = client.executions(project="dev", agent=dev.agent, limit=1)["items"]
        view = client.execution(newest["execution_id"])
    assert [r.get("decision") for r in view.get("reviews") or []] == ["rejected"], view


def test_without_a_terminal_it_approves(dev: DevSession) -> None:
    result = subprocess.run(
        _demo_argv(dev), env=cli_env(), capture_output=True, text=True, timeout=120, check=False
    )
    assert "no terminal to ask" in result.stdout, result.stdout + result.stderr
    with dev.client() as client:
        (newest,) = client.executions(project="dev", agent=dev.agent, limit=1)["items"]
        view = client.execution(newest["execution_id"])
    assert [r.get("decision") for r in view.get("reviews") or []] == ["approved"], view
