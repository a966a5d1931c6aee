"""A deep agent (deepagents) through real OE, AER and Tool Pod processes (issue 39).

The tenant is `tenant/lg_deep.py`: a lead with two subagents (`researcher` with `lookup`, `writer` with the
sensitive `publish`) and one skills source whose files are the Tool Pod's. The scripted loopback peer
answers the models in order; the tools append each call that really ran to the ledger.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli.driver import run as run_cli
from tests.integration.loop.harness import AGENT, LLM_KEY, Platform, Tenant
from tests.integration.runtime.launched import CONNECTOR_SECRET, write_provider_bundle
from tests.providers.llm_peer import RunningLLMPeer, Turn, running_llm_peer

TENANT = Path(__file__).resolve().parent / "tenant"
PROJECT = AGENT.split("/", 1)[0]
SKILL = """---
name: summarize
description: Summarize findings in three bullet points.
---
# Summarize
Write three bullets.
"""

pytestmark = pytest.mark.integration


class DeepPlatform(Platform):
    def _launch(self, env: dict[str, str], *, port: int, timeout: float = 30) -> Any:
        return super()._launch(env, port=port, timeout=max(timeout, 180))

    def _runtime_env(self, mode: str, port: int) -> dict[str, str]:
        env = super()._runtime_env(mode, port)
        if mode == "aer":
            env.update(
                CHECKPOINT_STORE="sqlite", CHECKPOINT_SQLITE_PATH=str(self.tmp / "checkpoints.sqlite3")
            )
        return env

    def start_oe(self, *, extra: Mapping[str, str] | None = None) -> None:
        # A restarted AER imports LangChain and deepagents again: give it long enough to come back.
        super().start_oe(extra={"OE_AER_LOST_AFTER_S": "60", **(extra or {})})

    def crash_aer(self) -> None:
        self.processes["aer"].stop(sig=signal.SIGKILL)
        self.start_aer()


@pytest.fixture(scope="module")
def peer() -> Iterator[RunningLLMPeer]:
    with running_llm_peer(api_key=LLM_KEY) as running:
        yield running


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deep-files")
    (root / "skills" / "summarize").mkdir(parents=True)
    (root / "skills" / "summarize" / "SKILL.md").write_text(SKILL)
    # Discovery is not recursive: a SKILL.md two levels down is no skill.
    (root / "skills" / "nested" / "deeper").mkdir(parents=True)
    (root / "skills" / "nested" / "deeper" / "SKILL.md").write_text(SKILL.replace("summarize", "deeper"))
    return root


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, module_spawn: Any, peer: RunningLLMPeer, files: Path
) -> Platform:
    tmp = tmp_path_factory.mktemp("lg-deep")
    tenant = Tenant(
        entrypoint="lg_deep:app",
        pythonpath=TENANT,
        bundle=lambda directory, url: write_provider_bundle(directory, base_url=url),
        tool_env={
            "OPENAI_API_KEY": LLM_KEY,
            "ECHO_TOKEN": CONNECTOR_SECRET,
            "DEEP_AGENT_FILES_ROOT": str(files),
        },
    )
    return DeepPlatform(
        tmp=tmp,
        spawn=module_spawn,
        llm_base_url=peer.base_url,
        provider_url="http://127.0.0.1:9",
        tenant=tenant,
        # A plan is a governed step (plan_audit.py): a policy can refuse one.
        policy={
            "denyWhen": [{"tool": "write_todos", "when": "args.todos.exists(t, t.content == 'forbidden')"}]
        },
    ).start()


def _ledger(platform: Platform) -> list[dict[str, Any]]:
    path = platform.ledger
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _invoke(platform: Platform, text: str) -> str:
    with platform.client() as client:
        response = client.post(
            "/invoke",
            json={
                "agent": AGENT,
                "input": {"messages": [{"role": "user", "content": text}]},
                "session_id": f"deep-{uuid.uuid4().hex[:12]}",
            },
        )
    assert response.status_code == 202, response.text
    return str(response.json()["execution_id"])


def _task(subagent: str, description: str) -> Turn:
    return Turn.calls(("task", {"description": description, "subagent_type": subagent}))


def test_a_deep_agent_with_two_subagents_and_a_skill_runs_governed(
    platform: Platform, peer: RunningLLMPeer, files: Path
) -> None:
    topic = f"tides-{uuid.uuid4().hex[:6]}"
    peer.push(
        _task("researcher", f"research {topic}"),
        Turn.calls(("lookup", {"topic": topic})),  # the researcher
        Turn.answer(f"{topic}: well documented"),
        Turn.calls(("write_file", {"file_path": "/notes.md", "content": f"notes on {topic}"})),  # the lead
        Turn.answer("done"),
    )
    asked_from = len(peer.requests)
    before = len(_ledger(platform))
    execution_id = _invoke(platform, f"Find out about {topic}")
    view = platform.wait(execution_id, "completed", "failed", "suspended", timeout=90)
    assert view["status"] == "completed", view
    assert view["result"]["messages"][-1]["content"] == "done"

    # The subagent's tool ran in the Tool Pod once; the file the lead wrote is there, not on the AER's disk.
    assert _ledger(platform)[before:] == [{"tool": "lookup", "topic": topic}]
    assert (files / "notes.md").read_text() == f"notes on {topic}"
    audit = platform.audit(execution_id)
    tools = [r["tool"] for r in audit if r["kind"] == "tool"]
    assert "lookup" in tools and "files_write" in tools and "files_ls" in tools, tools
    assert [r["step"] for r in audit if r["kind"] == "llm"], audit

    # The skill was found through the Tool Pod's files (only the immediate child) and offered to the model.
    first = json.dumps(peer.requests[asked_from].body)
    assert "Summarize findings in three bullet points." in first
    assert "deeper" not in first


def _events_until(platform: Platform, execution_id: str, wanted: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    with platform.client() as client, client.stream("GET", f"/execution/{execution_id}/events") as stream:
        for line in stream.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line.removeprefix("data: ")))
                if seen[-1]["type"] == wanted:
                    return seen
    raise AssertionError(f"the stream ended without a {wanted!r} event: {seen}")


def test_each_call_names_its_subagent_and_a_hold_inside_a_subagent_resumes_there(
    platform: Platform, peer: RunningLLMPeer
) -> None:
    topic = f"reefs-{uuid.uuid4().hex[:6]}"
    text = f"all about {topic}"
    peer.push(
        _task("researcher", f"research {topic}"),
        Turn.calls(("lookup", {"topic": topic})),
        Turn.answer(f"{topic}: well documented"),
        _task("writer", f"publish {topic}"),
        Turn.calls(("publish", {"text": text})),  # the writer: publish is sensitive, held
        Turn.answer("published"),
        Turn.answer("done"),
    )
    before = len(_ledger(platform))
    execution_id = _invoke(platform, f"Research and publish {topic}")
    view = platform.wait(execution_id, "completed", "failed", "suspended", timeout=90)
    assert view["status"] == "suspended", view
    assert _ledger(platform)[before:] == [{"tool": "lookup", "topic": topic}]

    with platform.client() as client:
        items = client.get(f"/api/v1/projects/{PROJECT}/reviews").json()["items"]
        review = next(item for item in items if item["execution_id"] == execution_id)
        assert review["asks"]["tool"] == "publish", review
        response = client.post(
            f"/api/v1/projects/{PROJECT}/executions/{execution_id}/resume", json={"decision": "approved"}
        )
    assert response.status_code == 202, response.text
    view = platform.wait(execution_id, "completed", "failed", "suspended", timeout=90)
    assert view["status"] == "completed", view
    assert view["result"]["messages"][-1]["content"] == "done"
    # The held call ran once, after the approval, and the subagent went on from there (its next answer).
    assert _ledger(platform)[before:] == [
        {"tool": "lookup", "topic": topic},
        {"tool": "publish", "text": text},
    ]

    # The audit names the agent that asked: the lead, or the subagent the task tool ran.
    audit = platform.audit(execution_id)
    named = {
        (r.get("tool"), (r.get("detail") or {}).get("agent_name"))
        for r in audit
        if r["kind"] in ("tool", "llm") and r.get("decision") not in ("cached",)
    }
    assert ("lookup", "researcher") in named and ("publish", "writer") in named, named
    assert ("invoke_llm", "lead") in named and ("invoke_llm", "researcher") in named, named
    assert ("invoke_llm", "writer") in named, named
    # ... and so do the events (and the execution log, which keeps the events' names).
    events = _events_until(platform, execution_id, "completed")
    steps = {
        (e["data"].get("tool"), e["data"].get("agent_name")) for e in events if e["type"] == "step_finished"
    }
    assert ("lookup", "researcher") in steps and ("publish", "writer") in steps, steps


def test_an_aer_crash_mid_subagent_replays_the_turn_and_runs_no_side_effect_twice(
    platform: DeepPlatform, peer: RunningLLMPeer
) -> None:
    """The AER is SIGKILLed while the researcher's `lookup` runs in the Tool Pod; the OE starts the run
    again on the new AER, which replays the turn from its first checkpoint against the replay cache."""
    topic = f"gate-{uuid.uuid4().hex[:6]}"
    peer.push(
        _task("researcher", f"research {topic}"),
        Turn.calls(("lookup", {"topic": topic})),
        Turn.answer(f"{topic}: well documented"),
        Turn.answer("done"),
    )
    asked_from = len(peer.requests)
    before = len(_ledger(platform))
    gates = platform.ledger.parent / "gates"
    execution_id = _invoke(platform, f"Find out about {topic}")
    deadline = time.monotonic() + 90
    while not (gates / f"at-{topic}").exists():
        assert time.monotonic() < deadline, "lookup never started"
        time.sleep(0.05)
    platform.crash_aer()
    (gates / f"go-{topic}").touch()
    view = platform.wait(execution_id, "completed", "failed", "suspended", timeout=120)
    assert view["status"] == "completed", (view.get("error"), view)
    assert view["result"]["messages"][-1]["content"] == "done"
    assert view["restarts"] >= 1, view
    # The side effect ran once, and the model was asked each question once: the rest came from the cache.
    assert _ledger(platform)[before:] == [{"tool": "lookup", "topic": topic}]
    assert len(peer.requests) - asked_from == 4
    audit = platform.audit(execution_id)
    assert any(r["kind"] == "restart" for r in audit), audit
    replayed = [r for r in audit if r.get("tool") == "lookup" and r["kind"] == "tool"]
    assert all((r.get("detail") or {}).get("agent_name") == "researcher" for r in replayed), replayed


def test_a_session_forked_at_its_last_model_step_reruns_from_there_and_the_parent_is_untouched(
    platform: Platform, peer: RunningLLMPeer
) -> None:
    topic = f"dunes-{uuid.uuid4().hex[:6]}"
    peer.push(
        _task("researcher", f"research {topic}"),
        Turn.calls(("lookup", {"topic": topic})),
        Turn.answer(f"{topic}: well documented"),
        Turn.answer("parent answer"),
    )
    before = len(_ledger(platform))
    session_id = f"deep-{uuid.uuid4().hex[:12]}"
    with platform.client() as client:
        response = client.post(
            "/invoke",
            json={
                "agent": AGENT,
                "input": {"messages": [{"role": "user", "content": f"About {topic}"}]},
                "session_id": session_id,
            },
        )
    parent_id = response.json()["execution_id"]
    parent = platform.wait(parent_id, "completed", "failed", timeout=90)
    assert parent["status"] == "completed", parent
    parent_audit = platform.audit(parent_id)
    last_model_step = max(r["step"] for r in parent_audit if r["kind"] == "llm")
    sessions = f"/api/v1/projects/{PROJECT}/agents/{AGENT.split('/', 1)[1]}/sessions"
    with platform.client() as client:
        # The thread's state (deepagents keeps its messages in a delta channel that /messages cannot read).
        listed = client.get(f"{sessions}/{session_id}/state")
        assert listed.status_code == 200, listed.text
        parent_state = listed.json()

    peer.push(Turn.answer("fork answer"))
    asked_from = len(peer.requests)
    fork_session = f"fork-{uuid.uuid4().hex[:12]}"
    with platform.client() as client:
        response = client.post(
            f"{sessions}/{session_id}/fork",
            json={"execution_id": parent_id, "step": last_model_step, "session_id": fork_session},
        )
    assert response.status_code == 202, response.text
    fork_id = response.json()["execution_id"]
    assert fork_id != parent_id and response.json()["session_id"] == fork_session
    fork = platform.wait(fork_id, "completed", "failed", timeout=90)
    assert fork["status"] == "completed", (fork.get("error"), fork)
    assert fork["result"]["messages"][-1]["content"] == "fork answer"
    # The fork's origin is the execution's own, not only its created event's.
    assert (fork["forked_from"], fork["at_step"]) == (parent_id, last_model_step)
    assert "forked_from" not in platform.wait(parent_id, "completed")
    # Steps before the fork point came from the cache: the model was asked once, nothing ran again.
    assert len(peer.requests) - asked_from == 1
    assert _ledger(platform)[before:] == [{"tool": "lookup", "topic": topic}]
    fork_audit = platform.audit(fork_id)
    live = [r["step"] for r in fork_audit if r["kind"] in ("tool", "llm") and r.get("decision") != "cached"]
    assert live == [last_model_step], fork_audit

    # The parent is untouched: its history, its audit and its result.
    with platform.client() as client:
        assert client.get(f"{sessions}/{session_id}/state").json() == parent_state
        forked = client.get(f"{sessions}/{fork_session}/state").json()["values"]["messages"]
        # The history route reads deepagents' delta channel through the graph too.
        history = client.get(f"{sessions}/{fork_session}/messages").json()["messages"]
    assert [m["content"] for m in history] == [m["content"] for m in forked]
    parent_messages = parent_state["values"]["messages"]
    assert forked[-1]["content"] == "fork answer" and parent_messages[-1]["content"] == "parent answer"
    # Before the fork point the two agree: the question, the task call and what the researcher found.
    assert [m["content"] for m in forked[:-1]] == [m["content"] for m in parent_messages[:-1]]
    assert platform.audit(parent_id) == parent_audit
    assert platform.wait(parent_id, "completed")["result"] == parent["result"]


def test_the_cli_forks_a_session(platform: Platform, peer: RunningLLMPeer) -> None:
    peer.push(Turn.answer("first"))
    session_id = f"deep-{uuid.uuid4().hex[:12]}"
    with platform.client() as client:
        response = client.post(
            "/invoke",
            json={
                "agent": AGENT,
                "input": {"messages": [{"role": "user", "content": "hi"}]},
                "session_id": session_id,
            },
        )
    parent_id = response.json()["execution_id"]
    assert platform.wait(parent_id, "completed", "failed", timeout=90)["status"] == "completed"
    model_step = max(r["step"] for r in platform.audit(parent_id) if r["kind"] == "llm")

    beyond = run_cli(platform, "fork", session_id, "-a", AGENT, "--execution", parent_id, "--step", "99")
    assert beyond.returncode != 0 and "step 99 is not a step" in beyond.stderr, beyond.stderr
    peer.push(Turn.answer("second"))
    done = run_cli(
        platform, "fork", session_id, "-a", AGENT, "--execution", parent_id, "--step", str(model_step),
        "--wait", "-o", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["status"] == "completed" and view["session_id"] != session_id, view
    assert view["result"]["messages"][-1]["content"] == "second"
    # `agentengine get execution` shows where the fork came from, in every output.
    shown = run_cli(platform, "get", "execution", view["execution_id"])
    assert shown.returncode == 0, shown.stderr
    rows = {line.split(None, 1)[0]: line.split(None, 1)[-1].strip() for line in shown.stdout.splitlines()}
    assert rows["forked_from"] == parent_id and rows["at_step"] == str(model_step), shown.stdout
    as_json = json.loads(run_cli(platform, "get", "execution", view["execution_id"], "-o", "json").stdout)
    assert (as_json["forked_from"], as_json["at_step"]) == (parent_id, model_step)
    assert platform.wait(parent_id, "completed")["result"]["messages"][-1]["content"] == "first"


def test_a_compiled_subgraph_as_a_node_is_held_inside_and_resumes_there_with_its_steps(
    platform: Platform, peer: RunningLLMPeer
) -> None:
    """Durable subgraphs: the held call inside the subgraph node runs once after the approval, and the
    resumed run's calls keep their step numbers (the OE would fail a diverged replay)."""
    text = f"note {uuid.uuid4().hex[:6]}"
    peer.push(Turn.calls(("publish", {"text": text})), Turn.answer("published it"))
    before = len(_ledger(platform))
    with platform.client() as client:
        response = client.post(
            "/invoke",
            json={
                "agent": AGENT,
                "input": {"messages": [{"role": "user", "content": "publish"}]},
                "session_id": f"sub-{uuid.uuid4().hex[:12]}",
            },
        )
    execution_id = response.json()["execution_id"]
    held = platform.wait(execution_id, "completed", "failed", "suspended", timeout=90)
    assert held["status"] == "suspended", held.get("error")
    assert _ledger(platform)[before:] == []
    with platform.client() as client:
        answer = client.post(
            f"/api/v1/projects/{PROJECT}/executions/{execution_id}/resume", json={"decision": "approved"}
        )
    assert answer.status_code == 202, answer.text
    view = platform.wait(execution_id, "completed", "failed", "suspended", timeout=90)
    assert view["status"] == "completed", (view.get("error"), view)
    assert view["result"]["messages"][-1]["content"] == "after: published it"
    assert _ledger(platform)[before:] == [{"tool": "publish", "text": text}]
    calls = [(r["step"], r["kind"]) for r in platform.audit(execution_id) if r["kind"] in ("tool", "llm")]
    steps = sorted({step for step, _ in calls})
    assert steps == [1, 2, 3], calls  # model, the held publish (asked, then run), model


def test_the_plan_is_a_governed_step_of_its_own_in_the_audit(
    platform: Platform, peer: RunningLLMPeer
) -> None:
    """`write_todos` goes to the OE first (the local tool of plan_audit.py): the audit holds the todos as
    that step's arguments, named for the agent planning, and deepagents then writes them to the state."""
    todo = f"survey the reefs {uuid.uuid4().hex[:6]}"
    peer.push(
        Turn.calls(("write_todos", {"todos": [{"content": todo, "status": "in_progress"}]})),
        Turn.answer("planned"),
    )
    execution_id = _invoke(platform, "make a plan")
    view = platform.wait(execution_id, "completed", "failed", timeout=90)
    assert view["status"] == "completed", (view.get("error"), view)
    audit = platform.audit(execution_id)
    plans = [r for r in audit if r.get("tool") == "write_todos" and r["kind"] == "tool"]
    assert len({r["step"] for r in plans}) == 1, plans  # one step (its decision and its outcome)
    assert any(todo in json.dumps(r.get("args")) for r in plans), plans
    assert any((r.get("detail") or {}).get("agent_name") == "lead" for r in plans), plans
    # The state has the plan: the tool message deepagents answers with reached the model.
    assert todo in json.dumps([r.get("args") for r in audit if r["kind"] == "llm"][-1])


def test_a_plan_the_policy_denies_is_not_written_and_the_model_reads_why(
    platform: Platform, peer: RunningLLMPeer
) -> None:
    peer.push(
        Turn.calls(("write_todos", {"todos": [{"content": "forbidden", "status": "pending"}]})),
        Turn.answer("no plan then"),
    )
    execution_id = _invoke(platform, "plan something forbidden")
    view = platform.wait(execution_id, "completed", "failed", timeout=90)
    assert view["status"] == "completed", (view.get("error"), view)
    audit = platform.audit(execution_id)
    denied = [r for r in audit if r.get("tool") == "write_todos"]
    assert [r["decision"] for r in denied] == ["deny"], denied
    last_question = json.dumps([r.get("args") for r in audit if r["kind"] == "llm"][-1])
    assert "denied by policy" in last_question and "Updated todo list" not in last_question, last_question
    with platform.client() as client:
        sessions = f"/api/v1/projects/{PROJECT}/agents/{AGENT.split('/')[1]}/sessions"
        state = client.get(f"{sessions}/{view['session_id']}/state").json()["values"]
    assert not state.get("todos"), state.get("todos")
