"""The `agentengine` CLI run as a subprocess against the real OE, AER and Tool Pod (issue 29, first slice):
the review loop a reviewer walks through, output for scripts, and the exit codes scripts branch on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import Process, free_port
from tests.exec_credential import exec_user
from tests.integration.cli.driver import SCRIPT, cli_env, ok_json, run
from tests.integration.loop.harness import CLIENT_TOKEN, Platform
from tests.providers.llm_peer import RunningLLMPeer

TRANSFER = {"mode": "calls", "calls": [["transfer", {"amount": 5, "to": "bob"}]]}
SHOUT = {"mode": "calls", "calls": [["shout", {"text": "ok"}]]}


def wait_status(platform: Platform, execution_id: str, *wanted: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        view = ok_json(platform, "get", "execution", execution_id)
        if view["status"] in wanted:
            return dict(view)
        assert time.monotonic() < deadline, view
        time.sleep(0.2)


def test_invoke_held_for_review_then_approved_with_edited_args_completes_and_is_audited(
    platform: Platform,
) -> None:
    held = ok_json(platform, "-n", "team-a", "invoke", "loop", "-i", json.dumps(TRANSFER), "--wait")
    assert held["status"] == "suspended" and held["suspension"]["kind"] == "approval_required"
    execution_id = held["execution_id"]

    pending = ok_json(platform, "-n", "team-a", "reviews")["items"]
    assert [item["execution_id"] for item in pending] == [execution_id]
    asks = pending[0]["asks"]
    assert asks["tool"] == "transfer" and asks["args"] == {"amount": 5, "to": "bob"}
    table = run(platform, "-n", "team-a", "reviews")
    assert table.returncode == 0 and execution_id in table.stdout and "transfer" in table.stdout
    assert "TOOL" in table.stdout.splitlines()[0]
    assert ok_json(platform, "-n", "team-b", "reviews")["items"] == []
    # The namespace after the verb too, as kubectl takes it; the nearer flag wins.
    assert ok_json(platform, "reviews", "-n", "team-a")["items"] == pending
    assert ok_json(platform, "-n", "team-b", "reviews", "-n", "team-a")["items"] == pending
    assert ok_json(platform, "-n", "team-a", "reviews", "-n", "team-b")["items"] == []
    assert [item["execution_id"] for item in ok_json(platform, "reviews", "-A")["items"]] == [execution_id]

    edited = {"amount": 7, "to": "bob"}
    resumed = ok_json(
        platform, "approve", execution_id, "--notes", "checked", "--edit-args", json.dumps(edited)
    )
    assert resumed["status"] in ("running", "completed")
    view = wait_status(platform, execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    assert view["reviews"][0]["decided_by"]["username"] == "agent-engine:static-token"

    records = ok_json(platform, "audit", execution_id)["records"]
    resume = next(r for r in records if r["kind"] == "resume")
    assert resume["args"] == {"requested": {"amount": 5, "to": "bob"}, "executed": edited}
    ran = [r for r in records if r["kind"] == "tool" and r["decision"] == "approved"]
    assert [r["tool"] for r in ran] == ["transfer"]
    audit_table = run(platform, "audit", execution_id)
    assert audit_table.returncode == 0 and "transfer" in audit_table.stdout and "resume" in audit_table.stdout

    listed = yaml.safe_load(run(platform, "-n", "team-a", "get", "executions", "-o", "yaml").stdout)
    assert execution_id in [item["execution_id"] for item in listed["items"]]
    everywhere = ok_json(platform, "get", "executions", "-A", "--status", "completed")
    assert execution_id in [item["execution_id"] for item in everywhere["items"]]

    # Paging: a second execution (its input from stdin), then one a page, newest first.
    second = ok_json(platform, "invoke", "team-a/loop", "-i", "@-", "--wait", stdin=json.dumps(SHOUT))
    first_page = run(platform, "-n", "team-a", "get", "executions", "--limit", "1")
    assert second["execution_id"] in first_page.stdout and "more: --cursor " in first_page.stderr
    cursor = first_page.stderr.split("more: --cursor ")[1].split()[0]
    next_page = ok_json(platform, "-n", "team-a", "get", "executions", "--limit", "1", "--cursor", cursor)
    assert [item["execution_id"] for item in next_page["items"]] == [execution_id]

    # The event stream: without -w the events so far; with -w it ends at the final event.
    stream = run(platform, "events", execution_id)
    assert stream.returncode == 0 and "suspended" in stream.stdout and "completed" in stream.stdout
    followed = run(platform, "events", execution_id, "-w", "-o", "json").stdout.splitlines()
    assert json.loads(followed[-1])["type"] == "completed"


def test_invoke_watch_follows_to_the_answer_and_reject_and_cancel_settle(platform: Platform) -> None:
    watched = run(platform, "invoke", "team-a/loop", "-i", json.dumps(SHOUT), "-w")
    assert watched.returncode == 0, watched.stderr
    lines = watched.stdout.splitlines()
    assert lines[0].startswith("execution ") and any(" completed" in line for line in lines)
    as_lines = run(platform, "invoke", "team-a/loop", "-i", json.dumps(SHOUT), "-w", "-o", "json")
    parsed = [json.loads(line) for line in as_lines.stdout.splitlines()]
    assert parsed[-2]["type"] == "completed" and parsed[-1]["result"] == {"results": [{"loud": "OK"}]}

    rejected = ok_json(platform, "invoke", "team-a/loop", "-i", json.dumps(TRANSFER), "--wait")
    rejected_id = rejected["execution_id"]
    assert ok_json(platform, "reject", rejected_id, "--notes", "no")["status"] in ("running", "completed")
    assert wait_status(platform, rejected_id, "completed", "failed")["reviews"][0]["decision"] == "rejected"

    # A script waiting on a suspended execution is told how to approve it; a cancel settles it.
    held = run(platform, "invoke", "team-a/loop", "-i", json.dumps(TRANSFER), "--wait")
    assert held.returncode == 0 and "agentengine approve" in held.stderr
    cancel_id = held.stdout.split()[held.stdout.split().index("execution_id") + 1]
    # Ctrl-C ends a watch quietly (the stream of a suspended execution stays open).
    base = cli_env(platform)
    watch = subprocess.Popen(
        [str(SCRIPT), "events", cancel_id, "-w"],
        env=base,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(4)  # the stored events reach the pipe (a loaded machine, through the recorder)
    watch.send_signal(signal.SIGINT)
    out, err = watch.communicate(timeout=10)
    assert "suspended" in out and "Traceback" not in err and watch.returncode == 130, err
    assert ok_json(platform, "cancel", cancel_id)["status"] == "cancelled"
    again = run(platform, "cancel", cancel_id)
    assert again.returncode == 1 and again.stderr.startswith("error: ") and "Traceback" not in again.stderr
    not_held = run(platform, "approve", rejected_id)
    assert not_held.returncode == 1 and "not suspended" in not_held.stderr


def test_exit_codes_name_the_fix(platform: Platform) -> None:
    wrong = run(platform, "get", "executions", token="not-the-token")
    assert wrong.returncode == 4, wrong.stderr
    assert "401" in wrong.stderr and "kubectl create token" in wrong.stderr
    assert "not-the-token" not in wrong.stderr + wrong.stdout

    unknown = run(platform, "get", "execution", "no-such-execution")
    assert unknown.returncode == 3 and "not found" in unknown.stderr
    assert run(platform, "audit", "no-such-execution").returncode == 3
    assert run(platform, "invoke", "team-a/nobody", "-i", "{}").returncode == 3

    failed = run(platform, "invoke", "team-a/loop", "-i", '{"mode": "nonsense"}', "--wait", "-o", "json")
    assert failed.returncode == 1 and json.loads(failed.stdout)["status"] == "failed"
    assert " failed: " in failed.stderr

    malformed = run(platform, "invoke", "team-a/loop", "-i", "{not json")
    assert malformed.returncode == 2 and "--input is not JSON" in malformed.stderr
    assert run(platform, "approve", "x", "--edit-args", "[1]").returncode == 2
    assert run(platform, "get", "executions", "--status", "bogus").returncode == 2

    no_server = run(platform, "get", "executions", env={"AGENTENGINE_SERVER": ""})
    assert no_server.returncode == 2 and "--server" in no_server.stderr
    dead = run(platform, "get", "executions", env={"AGENTENGINE_SERVER": "http://127.0.0.1:9"})
    assert dead.returncode == 1 and "cannot reach the OE" in dead.stderr and "Traceback" not in dead.stderr
    no_token = run(platform, "get", "executions", token=None)
    assert no_token.returncode == 4 and "AGENTENGINE_TOKEN" in no_token.stderr
    assert not any(CLIENT_TOKEN in text for text in (wrong.stderr, unknown.stderr, dead.stderr))


def test_credentials_and_namespace_from_the_kubeconfig_including_an_exec_plugin(
    platform: Platform, tmp_path: Path
) -> None:
    token_file = tmp_path / "client-token"
    token_file.write_text(CLIENT_TOKEN + "\n")
    calls = tmp_path / "plugin-calls"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "static",
        "contexts": [
            {"name": "static", "context": {"cluster": "c", "user": "file-user", "namespace": "team-a"}},
            {"name": "plugin", "context": {"cluster": "c", "user": "exec-user", "namespace": "team-a"}},
        ],
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [
            {"name": "file-user", "user": {"tokenFile": "client-token"}},  # relative to the kubeconfig
            {"name": "exec-user", "user": exec_user(token_file=token_file, calls_file=calls)},
        ],
    }
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    env = {"KUBECONFIG": str(kubeconfig)}
    held = ok_json(platform, "invoke", "loop", "-i", json.dumps(TRANSFER), "--wait", token=None, env=env)
    assert held["agent"] == "team-a/loop"  # the context's namespace
    by_plugin = ok_json(platform, "--context", "plugin", "reviews", token=None, env=env)["items"]
    assert [item["execution_id"] for item in by_plugin] == [held["execution_id"]]
    assert len(calls.read_text().splitlines()) == 1


def test_a_forbidden_namespace_exits_4_with_the_binding_to_ask_for(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> None:
    platform = Platform(tmp=tmp_path, spawn=spawn, llm_base_url=llm_peer.base_url, provider_url=provider_url)
    platform.start_tool_pod()
    platform.start_aer()
    platform.write_registrations()  # team-a/loop and team-b/other
    platform.start_oe(extra={"OE_CLIENT_TOKEN_NAMESPACES": "team-a"})
    refused = run(platform, "invoke", "team-b/other", "-i", json.dumps(SHOUT))
    assert refused.returncode == 4, refused.stderr
    assert refused.stderr.startswith("error: forbidden: ") and "team-b" in refused.stderr
    assert "agents/invoke" in refused.stderr and CLIENT_TOKEN not in refused.stderr
    assert "fix: bind ClusterRole agent-engine-invoker" in refused.stderr  # the OE's own hint, passed on


def test_shell_completion_and_help_need_no_server() -> None:
    env = {
        **os.environ,
        "COMP_WORDS": "agentengine ge",
        "COMP_CWORD": "1",
        "_AGENTENGINE_COMPLETE": "bash_complete",
    }
    done = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == "plain,get"
    helped = subprocess.run([str(SCRIPT), "invoke", "--help"], capture_output=True, text=True, timeout=30)
    assert helped.returncode == 0 and "--input" in helped.stdout
    usage = subprocess.run([str(SCRIPT), "frobnicate"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 2 and "No such command" in usage.stderr


def test_a_server_that_is_not_the_oe_is_named(tmp_path: Path, spawn: Callable[..., Process]) -> None:
    (tmp_path / "executions").write_text("<html>a static site</html>")
    port = free_port()
    spawn(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)],
        name="not-the-oe",
    )
    env = {**os.environ, "AGENTENGINE_SERVER": f"http://127.0.0.1:{port}", "AGENTENGINE_TOKEN": "t"}
    deadline = time.monotonic() + 10
    while True:
        done = subprocess.run([str(SCRIPT), "get", "executions"], env=env, capture_output=True, text=True)
        if "cannot reach" not in done.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert done.returncode == 1 and "is not the OE's JSON" in done.stderr and "Traceback" not in done.stderr
