"""agentRef (issue 38): another Agent called by reference, run by the OE as a child execution of its own,
through real OE, AER and Tool Pod processes on loopback.

The loop Agent (team-a/loop) names itself as `agent.loop` and team-b/other as `agent.other`; the OE's
static token is scoped to team-a, so the parent's user may invoke team-a/loop and not team-b/other.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import REPO_ROOT, Process
from tests.integration.loop.harness import AGENT, CLIENT_TOKEN, RUNTIME_TOKEN, Platform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import RunningLLMPeer, Turn, running_llm_peer

pytestmark = pytest.mark.integration

AGENT_REFS = [
    {"tool": "agent.loop", "agent": AGENT, "description": "the loop Agent, once"},
    {"tool": "agent.other", "agent": "team-b/other"},
    {"tool": "agent.loop.held", "agent": AGENT, "sensitive": True},
]


@pytest.fixture(scope="module")
def llm() -> Iterator[RunningLLMPeer]:
    with running_llm_peer() as peer:
        yield peer


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, module_spawn: Callable[..., Process], llm: RunningLLMPeer
) -> Iterator[Platform]:
    with running_echo_provider() as provider:
        platform = Platform(
            tmp=tmp_path_factory.mktemp("platform"),
            spawn=module_spawn,
            llm_base_url=llm.base_url,
            provider_url=provider.url,
            registration={"agentRefs": AGENT_REFS},
        )
        platform.start_tool_pod()
        platform.start_aer()
        platform.write_registrations()
        platform.start_oe(extra={"OE_CLIENT_TOKEN_NAMESPACES": "team-a"})
        yield platform


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"mode": "calls", "calls": [list(pair) for pair in pairs]}


def child_of(platform: Platform, parent: str, step: int = 1) -> str:
    """The child execution the parent's step audit names."""
    (record,) = [
        r
        for r in platform.audit(parent)
        if r["kind"] == "tool" and r["step"] == step and (r.get("detail") or {}).get("child_execution_id")
    ][-1:]
    return str(record["detail"]["child_execution_id"])


def executions_of(platform: Platform, agent: str) -> int:
    """Read the OE's own SQLite file: what exists, whatever a client may list."""
    with sqlite3.connect(platform.tmp / "oe" / "oe.sqlite3") as db:
        return int(db.execute("SELECT count(*) FROM executions WHERE agent = ?", (agent,)).fetchone()[0])


def test_an_agent_ref_call_is_a_child_execution_linked_to_its_parent(platform: Platform) -> None:
    parent = platform.invoke(calls(("agent.loop", {"input": calls(("shout", {"text": "hi"}))})))
    view = platform.wait(parent)
    assert view["status"] == "completed", view
    assert view["result"]["results"] == [{"results": [{"loud": "HI"}]}]
    child = child_of(platform, parent)
    child_view = platform.wait(child)
    assert child_view["status"] == "completed"
    # Linked both ways: the child's record and first audit record name the parent and its step.
    assert child_view["parent"] == {"execution_id": parent, "step": 1, "agent": AGENT, "depth": 1}
    # The parent's identity is the child's (not a connector's token): the same invoker.
    assert child_view["invoked_by"] == view["invoked_by"]
    child_audit = platform.audit(child)
    assert child_audit[0]["kind"] == "parent" and child_audit[0]["detail"]["execution_id"] == parent
    assert child_audit[0]["detail"]["step"] == 1
    # Governed in its own right: the child's tool call is in its audit, not in the parent's.
    assert "shout" in [r["tool"] for r in child_audit if r["kind"] == "tool"]
    parent_tools = [(r["tool"], r["route"]) for r in platform.audit(parent) if r["kind"] == "tool"]
    assert parent_tools == [("agent.loop", "agent")]


def test_a_model_is_offered_the_agent_refs_and_its_call_is_a_child(
    platform: Platform, llm: RunningLLMPeer
) -> None:
    """The OE sends the agentRefs with the run, so the model sees them among the run's tools (by their
    model name, dots mapped) and its call of one starts the child."""
    llm.reset()
    llm.push(
        Turn.calls(("agent__loop", {"input": calls(("shout", {"text": "deep"}))})),
        Turn.answer("the child said DEEP"),
    )
    parent = platform.invoke({"mode": "llm", "text": "ask the loop agent to shout deep"})
    view = platform.wait(parent)
    assert view["status"] == "completed", view
    assert view["result"] == {"answer": "the child said DEEP"}
    offered = {tool["function"]["name"]: tool["function"] for tool in llm.requests[0].body["tools"]}
    assert "agent__loop" in offered and offered["agent__loop"]["description"] == "the loop Agent, once"
    assert offered["agent__loop"]["parameters"]["required"] == ["input"]
    assert "agent__other" in offered
    answered = json.dumps(llm.requests[1].body["messages"])
    assert "DEEP" in answered
    child = child_of(platform, parent, step=2)
    assert platform.wait(child)["parent"] == {"execution_id": parent, "step": 2, "agent": AGENT, "depth": 1}


def cli_view(platform: Platform, execution_id: str) -> dict[str, Any]:
    """`agentengine get execution ID -o json`, the CLI as a user runs it against this OE."""
    env = {
        "PATH": "/usr/bin:/bin",
        "AGENTENGINE_SERVER": platform.oe_url,
        "AGENTENGINE_TOKEN": CLIENT_TOKEN,
        "HOME": str(platform.tmp),
        "PYTHONPATH": str(REPO_ROOT),
    }
    argv = [sys.executable, "-m", "agent_runtime.cli", "get", "execution", execution_id, "-o", "json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_cli_shows_the_parent_of_a_child_and_the_children_of_a_parent(platform: Platform) -> None:
    parent = platform.invoke(calls(("agent.loop", {"input": calls(("shout", {"text": "c"}))})))
    assert platform.wait(parent)["status"] == "completed"
    child = child_of(platform, parent)
    (shown,) = cli_view(platform, parent)["children"]
    assert shown == {
        "step": 1,
        "tool": "agent.loop",
        "execution_id": child,
        "agent": AGENT,
        "status": "completed",
    }
    assert cli_view(platform, child)["parent"]["execution_id"] == parent


def test_another_teams_agent_is_refused_and_nothing_starts(platform: Platform) -> None:
    before = executions_of(platform, "team-b/other")
    parent = platform.invoke(calls(("agent.other", {"input": calls(("shout", {"text": "x"}))})))
    view = platform.wait(parent)
    assert view["status"] == "completed", view
    (error,) = view["result"]["results"]
    assert "agent_ref_forbidden" in error["text"] or "agents/invoke" in error["text"], error
    assert "team-b/other" in error["text"]
    assert executions_of(platform, "team-b/other") == before == 0


def test_the_aer_cannot_choose_the_target_nor_a_tool_forge_a_parent_link(platform: Platform) -> None:
    """The attacker holds the Agent's runtime token (the AER) or a client token (a tool body calling the
    OE): it names the target in the arguments, sends a parent link to /invoke, calls another execution's
    step. None of it starts a child of team-b/other or links an execution to a parent it did not come from.
    """
    gate = platform.tmp / "gate-forge"
    parent = platform.invoke(calls(("wait_for_file", {"path": str(gate)})))
    platform.wait(parent, "running")
    with httpx.Client(
        base_url=platform.oe_url, headers={"authorization": f"Bearer {RUNTIME_TOKEN}"}, timeout=30
    ) as aer:
        forged = {
            "execution_id": parent,
            "step": 7,
            "tool": "agent.other",
            "args": {"input": calls(("shout", {"text": "x"})), "agent": AGENT, "target": AGENT},
        }
        answer = aer.post("/tool/execute", json=forged).json()
        assert answer["status"] == "error" and answer["error"]["category"] == "agent_ref_forbidden", answer
        # A tool the registration does not list as an agentRef starts no child, whatever it is called.
        shaped = {**forged, "step": 8, "tool": "agent.team-a.loop"}
        assert aer.post("/tool/execute", json=shaped).json()["proceed"] is False
    gate.write_text("go")
    assert platform.wait(parent)["status"] == "completed"
    assert executions_of(platform, "team-b/other") == 0
    with platform.client() as client:
        link = {"execution_id": parent, "step": 1, "agent": AGENT, "depth": 1}
        body = {"agent": AGENT, "input": calls(("shout", {"text": "y"})), "parent": link}
        started = client.post("/invoke", json=body)
        assert started.status_code == 202, started.text
        forged_child = started.json()["execution_id"]
    assert "parent" not in platform.wait(forged_child)
    assert all(r["kind"] != "parent" for r in platform.audit(forged_child))


def test_a_hold_inside_the_child_is_the_parents_and_the_childs_decision_resumes_both(
    platform: Platform,
) -> None:
    ledger_before = platform.ledger.read_text().splitlines() if platform.ledger.exists() else []
    held = calls(("transfer", {"amount": 7, "to": "ann"}))
    parent = platform.invoke(calls(("agent.loop", {"input": held}), ("shout", {"text": "after"})))
    view = platform.wait(parent)
    assert view["status"] == "suspended", view
    hold = view["suspension"]
    assert hold["kind"] == "child" and hold["step"] == 1 and hold["tool"] == "agent.loop"
    child = hold["payload"]["child_execution_id"]
    assert hold["payload"]["held"]["tool"] == "transfer" and hold["payload"]["held"]["step"] == 1
    assert child in hold["reason"]
    child_view = platform.wait(child)
    assert child_view["status"] == "suspended" and child_view["suspension"]["tool"] == "transfer"
    with platform.client() as client:
        # The parent's inbox entry names the child and its held call ...
        inbox = client.get("/api/v1/projects/team-a/reviews").json()["items"]
        (entry,) = [item for item in inbox if item["execution_id"] == parent]
        assert entry["asks"]["kind"] == "child"
        assert entry["asks"]["payload"]["child_execution_id"] == child
        assert entry["decisions"] == []
        assert entry["resume"] == f"/api/v1/projects/team-a/executions/{child}/resume"
        # ... but is decided in the child's own review: a decision on the parent is refused, naming it.
        refused = client.post(
            f"/api/v1/projects/team-a/executions/{parent}/resume", json={"decision": "approved"}
        )
        assert refused.status_code == 400, refused.text
        (problem,) = refused.json()["detail"]
        assert problem["field"] == "decision" and child in problem["problem"]
        assert (platform.ledger.read_text().splitlines() if platform.ledger.exists() else []) == ledger_before
        decided = client.post(
            f"/api/v1/projects/team-a/executions/{child}/resume", json={"decision": "approved"}
        )
        assert decided.status_code == 202, decided.text
    assert platform.wait(child)["status"] == "completed"
    done = platform.wait(parent)
    assert done["status"] == "completed", done
    transferred, after = done["result"]["results"]
    assert transferred["results"][0]["ok"] is True and after == {"loud": "AFTER"}
    assert platform.ledger.read_text().splitlines()[len(ledger_before) :] == ["7 ann"]
    # The parent's hold was lifted by the child's end, as the system, and its step ran again once.
    (review,) = done["reviews"]
    assert review["kind"] == "child" and review["decided_by"]["username"] == "agent-engine:child-execution"
    steps = [(r["step"], r["status"]) for r in platform.audit(parent) if r["tool"] == "agent.loop"]
    assert steps[0] == (1, "suspend") and steps[-1] == (1, "success"), steps
    assert child_of(platform, parent) == child


def test_cancelling_the_parent_cancels_the_child_it_waits_on_or_is_held_on(platform: Platform) -> None:
    with platform.client() as client:
        # A child still running (waiting on a file that never comes) while the parent's step waits on it.
        gate = platform.tmp / "gate-never"
        parent = platform.invoke(
            calls(("agent.loop", {"input": calls(("wait_for_file", {"path": str(gate)}))}))
        )
        platform.wait(parent, "running")
        child = wait_for_child(platform, parent)
        platform.wait(child, "running")
        assert client.post(f"/execution/{parent}/cancel").status_code == 200
        cancelled = platform.wait(child)
        assert cancelled["status"] == "cancelled", cancelled
        assert cancelled["cancelled_by"] == {
            "username": "agent-engine:parent-execution",
            "uid": parent,
            "groups": [],
        }
        # A parent held on its child's hold: its cancel cancels the held child too.
        held = platform.invoke(
            calls(("agent.loop", {"input": calls(("transfer", {"amount": 1, "to": "x"}))}))
        )
        hold = platform.wait(held)["suspension"]
        held_child = hold["payload"]["child_execution_id"]
        assert client.post(f"/execution/{held}/cancel").status_code == 200
    assert platform.wait(held_child, "cancelled")["status"] == "cancelled"


def wait_for_child(platform: Platform, parent: str, timeout: float = 30) -> str:
    """The child a parent's step started while the step still waits (its audit does not name it yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sqlite3.connect(platform.tmp / "oe" / "oe.sqlite3") as db:
            row = db.execute(
                "SELECT execution_id FROM executions WHERE json_extract(record, '$.parent.execution_id') = ?",
                (parent,),
            ).fetchone()
        if row is not None:
            return str(row[0])
        time.sleep(0.05)
    raise TimeoutError(f"no child of {parent}")


def test_a_sensitive_agent_ref_is_held_before_any_child_starts_and_its_approval_starts_one(
    platform: Platform,
) -> None:
    parent = platform.invoke(calls(("agent.loop.held", {"input": calls(("shout", {"text": "ok"}))})))
    hold = platform.wait(parent, "suspended")["suspension"]
    assert hold["kind"] == "approval_required" and hold["tool"] == "agent.loop.held", hold
    with sqlite3.connect(platform.tmp / "oe" / "oe.sqlite3") as db:
        started = db.execute(
            "SELECT count(*) FROM executions WHERE json_extract(record, '$.parent.execution_id') = ?",
            (parent,),
        ).fetchone()[0]
    assert started == 0, "no child may start before the parent's reviewer approves the call"
    with platform.client() as client:
        decided = client.post(
            f"/api/v1/projects/team-a/executions/{parent}/resume", json={"decision": "approved"}
        )
        assert decided.status_code == 202, decided.text
    done = platform.wait(parent, "completed", "failed")
    assert done["status"] == "completed" and done["result"]["results"] == [{"results": [{"loud": "OK"}]}]
    child = child_of(platform, parent)
    assert platform.wait(child)["parent"]["execution_id"] == parent
