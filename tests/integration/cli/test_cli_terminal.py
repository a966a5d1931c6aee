"""The real `agentengine` in a real pseudo-terminal (pexpect) against the real OE, AER and Tool Pod: follow
an invoke, approve with --edit through a scripted $EDITOR (bad JSON first: asked, re-opened), reject,
cancel, and the bad inputs a person makes: each one line naming the fix, a non-zero exit, no traceback."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pexpect
import yaml

from tests.integration.cli.driver import SCRIPT, cli_env, ok_json
from tests.integration.loop.harness import Platform
from tests.providers.llm_peer import RunningLLMPeer, Turn

TRANSFER = {"mode": "calls", "calls": [["transfer", {"amount": 5, "to": "bob"}]]}
SHOUT = {"mode": "calls", "calls": [["shout", {"text": "ok"}]]}
EDITED = {"amount": 9, "to": "bob"}


def terminal(platform: Platform | None, *argv: str, env: dict[str, str] | None = None) -> pexpect.spawn:
    return pexpect.spawn(
        str(SCRIPT), list(argv), env=cli_env(platform, env=env), encoding="utf-8", timeout=60
    )


def finished(child: pexpect.spawn) -> tuple[int, str]:
    child.expect(pexpect.EOF)
    child.close()
    return int(child.exitstatus if child.exitstatus is not None else -1), str(child.before)


def one_line(child: pexpect.spawn, *, code: int) -> str:
    status, shown = finished(child)
    lines = [line for line in shown.replace("\r", "").splitlines() if line.strip()]
    assert status == code, shown
    assert len(lines) == 1 and lines[0].startswith("error: "), shown
    assert "Traceback" not in shown
    return lines[0]


def scripted_editor(tmp_path: Path) -> str:
    """An $EDITOR that writes bad JSON the first time it is opened, then the edited arguments."""
    script = tmp_path / "editor.py"
    count = tmp_path / "editor-runs"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, pathlib, sys\n"
        f"count = pathlib.Path({str(count)!r})\n"
        "runs = int(count.read_text()) if count.exists() else 0\n"
        "count.write_text(str(runs + 1))\n"
        "target = pathlib.Path(sys.argv[-1])\n"
        "if runs == 0:\n"
        "    assert json.loads(target.read_text()) == {'amount': 5, 'to': 'bob'}\n"
        "    target.write_text('{not json')\n"
        "else:\n"
        "    assert target.read_text().strip() == '{not json'  # re-opened on what was written\n"
        f"    target.write_text({json.dumps(EDITED)!r})\n"
    )
    script.chmod(0o755)
    return str(script)


def held(platform: Platform) -> str:
    view = ok_json(platform, "invoke", "team-a/loop", "-i", json.dumps(TRANSFER), "--wait")
    assert view["status"] == "suspended"
    return str(view["execution_id"])


def test_follow_edit_reject_and_cancel_at_a_terminal(
    platform: Platform, llm_peer: RunningLLMPeer, tmp_path: Path
) -> None:
    # The model's answer streams: its deltas are written as they come, on one line.
    words = " ".join(f"word{i}" for i in range(12))
    llm_peer.push(Turn.answer(words, chunk_delay_s=0.01))
    streamed = terminal(platform, "invoke", "team-a/loop", "-i", '{"mode": "llm", "text": "hi"}', "--follow")
    streamed.expect(r"step_started step 1 \S+ via tool_pod")
    streamed.expect("model: " + words)
    streamed.expect("completed")
    status, _ = finished(streamed)
    assert status == 0

    follow = terminal(platform, "invoke", "team-a/loop", "-i", json.dumps(SHOUT), "--follow")
    follow.expect(r"step_started step \d+ shout via tool_pod")
    follow.expect(r"step_finished step \d+ shout success")
    follow.expect("completed")
    status, shown = finished(follow)
    assert status == 0 and '"loud": "OK"' in shown, shown

    execution_id = held(platform)
    editor = scripted_editor(tmp_path)
    approve = terminal(
        platform, "approve", execution_id, "--edit", "--notes", "fixed", env={"EDITOR": editor}
    )
    approve.expect("not JSON")
    approve.expect(r"edit again\? \[Y/n\]")
    approve.sendline("y")
    status, shown = finished(approve)
    assert status == 0, shown
    assert (tmp_path / "editor-runs").read_text() == "2"
    view = ok_json(platform, "get", "execution", execution_id)
    records = ok_json(platform, "audit", execution_id)["records"]
    resume = next(r for r in records if r["kind"] == "resume")
    assert resume["args"] == {"requested": {"amount": 5, "to": "bob"}, "executed": EDITED}, view

    rejected = held(platform)
    status, _ = finished(terminal(platform, "reject", rejected, "--notes", "no"))
    assert status == 0
    cancelled = held(platform)
    status, shown = finished(terminal(platform, "cancel", cancelled))
    assert status == 0 and "cancelled" in shown
    assert ok_json(platform, "get", "execution", cancelled)["status"] == "cancelled"

    # An $EDITOR that saves nothing is a cancel: nothing is sent, the call stays held.
    kept = held(platform)
    unchanged = tmp_path / "unchanged.sh"
    unchanged.write_text("#!/bin/sh\nexit 0\n")
    unchanged.chmod(0o755)
    line = one_line(terminal(platform, "approve", kept, "--edit", env={"EDITOR": str(unchanged)}), code=1)
    assert "nothing was saved" in line
    assert ok_json(platform, "get", "execution", kept)["status"] == "suspended"

    # Bad input, each at the terminal.
    assert "not suspended" in one_line(terminal(platform, "approve", cancelled), code=1)
    assert "not suspended" in one_line(terminal(platform, "approve", cancelled, "--edit"), code=1)
    assert "409" in one_line(terminal(platform, "interrupt", cancelled, "1"), code=1)
    unknown = one_line(terminal(platform, "invoke", "team-a/nobody", "-i", "{}"), code=3)
    assert "not found" in unknown and "Ready" in unknown
    malformed = one_line(terminal(platform, "invoke", "team-a/loop", "-i", "{oops"), code=2)
    assert "--input is not JSON" in malformed
    dead = one_line(
        terminal(None, "get", "executions", env={"AGENTENGINE_SERVER": "http://127.0.0.1:9"}), code=1
    )
    assert "cannot reach the OE" in dead


def test_a_kubeconfig_whose_api_server_is_down_names_the_fix(tmp_path: Path) -> None:
    """No --server: the CLI looks for the OE through the kubeconfig's cluster; one that does not answer is
    one line naming the context and --server (the cluster tier covers a cluster without the OE)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}}],
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    child = terminal(None, "get", "executions", env={"KUBECONFIG": str(kubeconfig)})
    line = one_line(child, code=1)
    assert "cannot reach the Kubernetes API server https://127.0.0.1:9" in line and "--server" in line
    no_kubeconfig = one_line(terminal(None, "get", "executions"), code=2)
    assert "--server" in no_kubeconfig and "AGENTENGINE_SERVER" in no_kubeconfig
