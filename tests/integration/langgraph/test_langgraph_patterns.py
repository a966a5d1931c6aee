"""LangGraph's documented patterns through real OE, AER and Tool Pod processes (issue 31).

The graphs are `tests/integration/langgraph/tenant/lg_patterns.py`, written as LangGraph's docs write them
(the prebuilt ReAct agent with and without a breakpoint before the tools, the "review tool calls" how-to
with `interrupt()`, a graph of several interrupts, a sync graph with `model.invoke`). The model is a
key-less `ChatOpenAI` that runs in the Tool Pod against the counting loopback peer; the tools append each
call that really ran to a ledger file. Each test asserts the side effects, the audit and the final state;
each of the issue's seven findings has one that fails on the code before the fix (the docstrings say
which).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.langgraph.stopped_tool_calls import STOPPED_TEXT
from tests.conftest import Process
from tests.integration.cli.driver import run as run_cli
from tests.integration.loop.harness import AGENT, LLM_KEY, RUNTIME_TOKEN, Platform, Tenant
from tests.integration.runtime.launched import CONNECTOR_SECRET, write_provider_bundle
from tests.providers.llm_peer import RecordedRequest, RunningLLMPeer, Turn, running_llm_peer

TENANT = Path(__file__).resolve().parent / "tenant"
PROJECT = AGENT.split("/", 1)[0]
UNKNOWN_LOCATION = "Unknown location, use <city, country>"

pytestmark = pytest.mark.integration


def _bundle(directory: Path, provider_url: str) -> Path:
    return write_provider_bundle(directory, base_url=provider_url)


class PatternsPlatform(Platform):
    """The loop harness's platform; LangChain and LangGraph take a while to import on a loaded machine."""

    def _launch(self, env: dict[str, str], *, port: int, timeout: float = 30) -> Process:
        return super()._launch(env, port=port, timeout=max(timeout, 180))

    def _runtime_env(self, mode: str, port: int) -> dict[str, str]:
        env = super()._runtime_env(mode, port)
        if mode == "aer":
            # This run's own store: the default file under the system temp dir outlives the run.
            store = str(self.tmp / "checkpoints.sqlite3")
            env.update(CHECKPOINT_STORE="sqlite", CHECKPOINT_SQLITE_PATH=store)
        return env


@pytest.fixture(scope="module")
def peer() -> Iterator[RunningLLMPeer]:
    with running_llm_peer(api_key=LLM_KEY) as running:
        yield running


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory, module_spawn: Any, peer: RunningLLMPeer) -> Platform:
    tmp = tmp_path_factory.mktemp("lg-patterns")
    tenant = Tenant(
        entrypoint="lg_patterns:app",
        pythonpath=TENANT,
        bundle=_bundle,
        # Where the docs' ChatOpenAI(model=...) reads its key: the Tool Pod's environment only.
        tool_env={"OPENAI_API_KEY": LLM_KEY, "ECHO_TOKEN": CONNECTOR_SECRET},
    )
    return PatternsPlatform(
        tmp=tmp,
        spawn=module_spawn,
        llm_base_url=peer.base_url,
        provider_url="http://127.0.0.1:9",
        tenant=tenant,
        policy={"requireApproval": ["book_table"]},
    ).start()


class Session:
    """One session's turns, with what the model was asked and what ran during them."""

    def __init__(self, platform: Platform, peer: RunningLLMPeer, session_id: str) -> None:
        self.platform = platform
        self.peer = peer
        self.session_id = session_id
        self.asked_from = len(peer.requests)
        self.ledger_from = len(self.ledger_all())

    def ledger_all(self) -> list[dict[str, Any]]:
        path = self.platform.ledger
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def ledger(self) -> list[dict[str, Any]]:
        return self.ledger_all()[self.ledger_from :]

    def asked(self) -> list[RecordedRequest]:
        return self.peer.requests[self.asked_from :]

    def invoke(self, task: Any) -> str:
        with self.platform.client() as client:
            response = client.post(
                "/invoke", json={"agent": AGENT, "input": task, "session_id": self.session_id}
            )
        assert response.status_code == 202, response.text
        return str(response.json()["execution_id"])

    def say(self, text: str) -> str:
        return self.invoke({"messages": [{"role": "user", "content": text}]})

    def resume(self, execution_id: str, body: dict[str, Any]) -> httpx.Response:
        with self.platform.client() as client:
            return client.post(f"/api/v1/projects/{PROJECT}/executions/{execution_id}/resume", json=body)

    def wait(self, execution_id: str, *states: str) -> dict[str, Any]:
        return self.platform.wait(execution_id, *states, timeout=60)

    def resumed(self, execution_id: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.resume(execution_id, body)
        assert response.status_code == 202, response.text
        return self.wait(execution_id, "completed", "failed", "suspended")

    def review(self, execution_id: str) -> dict[str, Any]:
        with self.platform.client() as client:
            items = client.get(f"/api/v1/projects/{PROJECT}/reviews").json()["items"]
        return next(item for item in items if item["execution_id"] == execution_id)


@pytest.fixture
def session(platform: Platform, peer: RunningLLMPeer, request: pytest.FixtureRequest) -> Any:
    def make(session_id: str) -> Session:
        return Session(platform, peer, f"{session_id}-{uuid.uuid4().hex[:12]}")

    return make


def _tool_calls(view: dict[str, Any]) -> list[dict[str, Any]]:
    messages = view["result"]["messages"]
    return [call for m in messages if m["type"] == "ai" for call in m.get("tool_calls") or []]


def _records(platform: Platform, execution_id: str, tool: str) -> list[dict[str, Any]]:
    return [r for r in platform.audit(execution_id) if r.get("tool") == tool and r["kind"] == "tool"]


def test_prebuilt_react_agent_governs_the_tools_it_was_handed_and_edits_reach_the_state(
    session: Any, platform: Platform
) -> None:
    """Findings 1 (the given tool object ran ungoverned in the AER), 4 (an edit never reached the state),
    5 (ChatOpenAI without a key failed the AER's build) and 6 (a ToolException's message was hidden)."""
    s = session("react")
    s.peer.push(
        Turn.calls(("get_weather", {"city": "Atlantis"})),
        Turn.calls(("get_weather", {"city": "Paris, France"})),
        Turn.calls(("book_table", {"restaurant": "Chez Loop", "people": 2})),
    )
    execution_id = s.say("weather in Atlantis, then book a table")
    view = s.wait(execution_id)
    # 5: the AER built ChatOpenAI(model=...) with no key and never sent with it; the Tool Pod did.
    assert view["status"] == "suspended", view
    assert all(LLM_KEY in (r.authorization or "") for r in s.asked())
    # 1: book_table, handed to create_react_agent, went through the OE: held by requireApproval.
    assert view["suspension"]["tool"] == "book_table" and view["suspension"]["kind"] == "approval_required"
    # get_weather ran in the Tool Pod once (Atlantis was refused by the tool itself), audited.
    assert s.ledger() == [{"tool": "get_weather", "city": "Paris, France"}]
    assert [r["route"] for r in _records(platform, execution_id, "get_weather")] == ["tool_pod", "tool_pod"]
    # 6: the tool's own message reached the model verbatim.
    told = s.asked()[1].body["messages"][-1]
    assert told["role"] == "tool" and told["content"] == UNKNOWN_LOCATION

    # 4: approved with edited arguments: the tool ran with them once, and the state says so.
    s.peer.push(Turn.answer("Booked for four."))
    view = s.resumed(execution_id, {"decision": "approved", "args": {"restaurant": "Chez Loop", "people": 4}})
    assert view["status"] == "completed", view
    assert s.ledger()[1:] == [{"tool": "book_table", "restaurant": "Chez Loop", "people": 4}]
    booked = [m for m in view["result"]["messages"] if m["type"] == "ai" and m.get("tool_calls")][-1]
    assert booked["tool_calls"][0]["args"] == {"restaurant": "Chez Loop", "people": 4}
    requested = booked["response_metadata"]["agent_engine"]["requested_args"]
    assert requested == {booked["tool_calls"][0]["id"]: {"restaurant": "Chez Loop", "people": 2}}
    shown = s.asked()[-1].body["messages"]
    last_call = [m for m in shown if m["role"] == "assistant" and m.get("tool_calls")][-1]["tool_calls"][0]
    assert json.loads(last_call["function"]["arguments"]) == {"restaurant": "Chez Loop", "people": 4}
    resume = next(r for r in platform.audit(execution_id) if r["kind"] == "resume")
    assert resume["args"]["requested"] == {"restaurant": "Chez Loop", "people": 2}
    assert len(s.asked()) == 4


def test_prebuilt_react_agent_with_a_breakpoint_is_held_and_continues_when_approved(session: Any) -> None:
    """Finding 2: interrupt_before=["tools"] ended the turn `completed` on an unanswered tool call, created
    no review, and broke every later turn of the session."""
    s = session("breakpoint")
    s.peer.push(Turn.calls(("get_weather", {"city": "Oslo, Norway"})))
    execution_id = s.say("weather in Oslo")
    view = s.wait(execution_id)
    assert view["status"] == "suspended", view
    assert view["suspension"]["kind"] == "breakpoint" and view["suspension"]["payload"] == {"next": ["tools"]}
    review = s.review(execution_id)
    assert review["asks"]["kind"] == "breakpoint" and review["may_send_value"] is False
    assert s.ledger() == []
    refused = s.resume(execution_id, {"decision": "approved", "value": 1})
    assert refused.status_code == 400 and refused.json()["detail"][0]["field"] == "value", refused.text

    s.peer.push(Turn.answer("Sunny in Oslo."))
    view = s.resumed(execution_id, {"decision": "approved"})
    assert view["status"] == "completed", view
    assert view["result"]["messages"][-1]["content"] == "Sunny in Oslo."
    assert s.ledger() == [{"tool": "get_weather", "city": "Oslo, Norway"}]
    # The session goes on.
    s.peer.push(Turn.answer("You're welcome."))
    later = s.wait(s.say("thanks"))
    assert later["status"] == "completed", later
    assert len(s.asked()) == 3


def test_a_rejected_breakpoint_ends_the_turn_and_the_next_turn_runs(session: Any) -> None:
    """Findings 2 and 3: a rejection ends the turn, runs nothing, and leaves the thread usable."""
    s = session("breakpoint")
    s.peer.push(Turn.calls(("get_weather", {"city": "Rome, Italy"})))
    execution_id = s.say("weather in Rome")
    assert s.wait(execution_id)["status"] == "suspended"
    view = s.resumed(execution_id, {"decision": "rejected", "reviewer_notes": "not now"})
    assert view["status"] == "failed" and "not now" in view["error"]["explanation"], view
    s.peer.push(Turn.answer("Something else, then?"))
    later = s.wait(s.say("never mind"))
    assert later["status"] == "completed", later
    assert s.ledger() == []
    told = [m for m in s.asked()[-1].body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in told] == [STOPPED_TEXT]


def test_a_turn_that_fails_leaves_the_thread_so_the_next_turn_runs(session: Any) -> None:
    """Finding 3: after a failed turn every later turn of the session failed again."""
    s = session("hook")
    s.peer.push(Turn.calls(("get_weather", {"city": "Bern, Switzerland"})))
    failed = s.wait(s.say("crash, then the weather in Bern"))
    assert failed["status"] == "failed" and "audit hook crashed" in failed["error"]["explanation"], failed
    s.peer.push(Turn.answer("Hello again."))
    later = s.wait(s.say("hello"))
    assert later["status"] == "completed", later
    assert later["result"]["messages"][-1]["content"] == "Hello again."
    # One model call for the new turn, shown the unanswered call as stopped, never as a result.
    assert len(s.asked()) == 2
    roles = [(m["role"], m.get("content")) for m in s.asked()[1].body["messages"]]
    assert ("tool", STOPPED_TEXT) in roles
    assert s.ledger() == []


@pytest.mark.parametrize(
    ("value", "city", "ran"),
    [
        ({"action": "continue"}, "Paris, France", [{"tool": "get_weather", "city": "Paris, France"}]),
        (
            {"action": "update", "data": {"city": "Lyon, France"}},
            "Lyon",
            [{"tool": "get_weather", "city": "Lyon, France"}],
        ),
        ({"action": "feedback", "data": "ask for Nice instead"}, "Paris, France", []),
    ],
    ids=["approve", "edit", "feedback"],
)
def test_review_tool_calls_with_interrupt(
    session: Any, platform: Platform, value: dict[str, Any], city: str, ran: list[dict[str, Any]]
) -> None:
    """Native interrupt(): held as kind `interrupt`, resumed with the reviewer's value (the review
    how-to's continue / update / feedback). Before: the SDK refused every interrupt()."""
    s = session("review")
    s.peer.push(Turn.calls(("get_weather", {"city": city})))
    execution_id = s.say(f"weather in {city}")
    view = s.wait(execution_id)
    assert view["status"] == "suspended", view
    held = view["suspension"]
    assert held["kind"] == "interrupt" and held["payload"]["question"] == "Is this correct?"
    assert held["payload"]["tool_call"]["args"] == {"city": city}
    assert s.review(execution_id)["may_send_value"] is True
    assert s.ledger() == []

    s.peer.push(Turn.answer("Done."))
    view = s.resumed(execution_id, {"decision": "approved", "value": value})
    assert view["status"] == "completed", view
    assert s.ledger() == ran
    assert len(s.asked()) == 2
    if value["action"] == "feedback":
        told = s.asked()[1].body["messages"][-1]
        assert told["role"] == "tool" and told["content"] == "ask for Nice instead"
    audit = platform.audit(execution_id)
    hold = next(r for r in audit if r["kind"] == "tool" and r["tool"] == "app.suspend")
    assert hold["args"]["kind"] == "interrupt"
    resume = next(r for r in audit if r["kind"] == "resume")
    assert resume["args"]["executed"] == {"value": value}


def test_several_interrupts_in_one_node_and_in_parallel_tasks_resume_in_order(session: Any) -> None:
    s = session("multi")
    execution_id = s.invoke({"answers": []})
    asked: list[Any] = []
    for answer in ("Ada", 36, True, False):
        view = s.wait(execution_id, "suspended", "completed", "failed")
        assert view["status"] == "suspended", view
        asked.append(view["suspension"]["payload"])
        view = s.resumed(execution_id, {"decision": "approved", "value": answer})
    assert asked == [
        "what is your name?",
        "how old are you, Ada?",
        "approve the first item?",
        "approve the second item?",
    ]
    assert view["status"] == "completed", view
    answers = view["result"]["answers"]
    assert answers[0] == {"name": "Ada", "age": 36}
    assert sorted(answers[1:], key=json.dumps) == [{"first": True}, {"second": False}]


def test_a_rejected_interrupt_uncaught_fails_the_turn_and_the_thread_goes_on(session: Any) -> None:
    """A node that does not catch `InterruptRejected`: the turn fails naming it, with the reviewer's notes;
    the next turn on the session runs the graph afresh (its first interrupt again), not the rejected task."""
    s = session("multi")
    execution_id = s.invoke({"answers": []})
    assert s.wait(execution_id)["status"] == "suspended"
    wrong = s.resume(execution_id, {"decision": "rejected", "value": "x"})
    assert wrong.status_code == 400 and wrong.json()["detail"][0]["field"] == "value", wrong.text
    view = s.resumed(execution_id, {"decision": "rejected", "reviewer_notes": "no names"})
    assert view["status"] == "failed", view
    explanation = view["error"]["explanation"]
    assert "InterruptRejected" in explanation and "no names" in explanation, view
    following = s.invoke({"answers": []})
    again = s.wait(following, "suspended", "completed", "failed")
    assert again["status"] == "suspended", again
    assert again["suspension"]["payload"] == "what is your name?"
    answered = s.resumed(following, {"decision": "approved", "value": "Ada"})
    assert answered["status"] == "suspended" and answered["suspension"]["payload"] == "how old are you, Ada?"


def test_a_rejected_interrupt_raises_in_the_node_which_catches_it_and_takes_another_branch(
    session: Any, platform: Platform
) -> None:
    """`rejected` on a native interrupt raised `InterruptRejected` at the node's `interrupt()` (it ended the
    whole turn FAILED before): the node tells the model, the tool never runs, the turn completes."""
    s = session("guarded")
    s.peer.push(Turn.calls(("get_weather", {"city": "Atlantis"})), Turn.answer("Then I will not look."))
    execution_id = s.say("weather in Atlantis")
    view = s.wait(execution_id, "suspended", "completed", "failed")
    assert view["status"] == "suspended" and view["suspension"]["payload"]["question"] == "Is this correct?"
    view = s.resumed(execution_id, {"decision": "rejected", "reviewer_notes": "not a real city"})
    assert view["status"] == "completed", view
    assert view["result"]["messages"][-1]["content"] == "Then I will not look."
    assert s.ledger() == []  # get_weather never ran
    told = [m for m in s.asked()[-1].body["messages"] if m.get("role") == "tool"]
    assert [m["content"] for m in told] == ["the reviewer declined this call: not a real city"]
    assert not _records(platform, execution_id, "get_weather")
    resume = next(r for r in platform.audit(execution_id) if r["kind"] == "resume")
    assert resume["decision"] == "rejected" and resume["reason"] == "not a real city", resume


def test_the_cli_answers_an_interrupt_with_a_json_value(session: Any, platform: Platform) -> None:
    """`agentengine approve ID --value JSON` is `Command(resume=value)`; bad JSON is a usage error."""
    s = session("multi")
    execution_id = s.invoke({"answers": []})
    assert s.wait(execution_id)["status"] == "suspended"
    bad = run_cli(platform, "approve", execution_id, "--value", "{Ada")
    assert bad.returncode == 2 and "--value is not JSON" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
    done = run_cli(platform, "approve", execution_id, "--value", '"Ada"')
    assert done.returncode == 0, done.stderr
    view = s.wait(execution_id, "suspended", "completed", "failed")
    assert view["status"] == "suspended" and view["suspension"]["payload"] == "how old are you, Ada?", view
    assert run_cli(platform, "approve", execution_id, "--value", "36").returncode == 0
    view = s.wait(execution_id, "suspended", "completed", "failed")
    assert view["suspension"]["payload"] == "approve the first item?", view


def test_a_sync_graph_with_model_invoke_runs(session: Any, platform: Platform) -> None:
    """Finding 7: sync nodes calling `model.invoke` and `tool.invoke` were refused."""
    s = session("sync")
    s.peer.push(Turn.calls(("get_weather", {"city": "Kyoto, Japan"})), Turn.answer("Sunny in Kyoto."))
    execution_id = s.say("weather in Kyoto")
    view = s.wait(execution_id)
    assert view["status"] == "completed", view
    assert view["result"]["messages"][-1]["content"] == "Sunny in Kyoto."
    assert s.ledger() == [{"tool": "get_weather", "city": "Kyoto, Japan"}]
    assert [r["step"] for r in platform.audit(execution_id) if r["kind"] == "llm"] == [1, 3]
    assert _tool_calls(view)[0]["args"] == {"city": "Kyoto, Japan"}


def test_no_process_printed_the_key(platform: Platform) -> None:
    assert LLM_KEY not in "\n".join(p.output() for p in platform.processes.values() if isinstance(p, Process))


def test_a_sessions_thread_state_and_history_through_the_oe(session: Any, platform: Platform) -> None:
    """get_state / update_state and the session history routes (LG-13), scoped to the workspace."""
    s = session("react")
    s.peer.push(Turn.answer("Hello there."))
    assert s.wait(s.say("hi"))["status"] == "completed"
    base = f"/api/v1/projects/{PROJECT}/agents/{AGENT.split('/', 1)[1]}/sessions"
    with platform.client() as client:
        state = client.get(f"{base}/{s.session_id}/state")
        assert state.status_code == 200, state.text
        assert [m["content"] for m in state.json()["values"]["messages"]] == ["hi", "Hello there."]
        assert state.json()["next"] == [] and state.json()["interrupts"] == []
        assert s.session_id in client.get(base).json()["sessions"]
        history = client.get(f"{base}/{s.session_id}/messages").json()["messages"]
        assert [(m["type"], m["content"]) for m in history] == [("human", "hi"), ("ai", "Hello there.")]

        note = {"messages": [{"role": "user", "content": "remember: window seat"}]}
        updated = client.post(f"{base}/{s.session_id}/state", json={"values": note, "as_node": "agent"})
        assert updated.status_code == 200, updated.text
        assert updated.json()["values"]["messages"][-1]["content"] == "remember: window seat"
        wrong_node = client.post(f"{base}/{s.session_id}/state", json={"values": {}, "as_node": "nope"})
        assert wrong_node.status_code == 400 and "as_node" in wrong_node.text, wrong_node.text
        wrong_body = client.post(f"{base}/{s.session_id}/state", json={"value": 1})
        assert wrong_body.status_code == 400 and "values" in wrong_body.text, wrong_body.text
        assert client.get(f"{base}/react-never-seen/state").status_code == 404
        # Another project's path reaches no thread of this one.
        other = client.get(f"/api/v1/projects/team-b/agents/other/sessions/{s.session_id}/state")
        assert other.status_code != 200 and "window seat" not in other.text
    # The next turn goes on from the updated state.
    s.peer.push(Turn.answer("Noted."))
    assert s.wait(s.say("ok"))["status"] == "completed"
    assert "remember: window seat" in json.dumps(s.asked()[-1].body["messages"])


def test_the_runtime_token_does_not_open_the_aers_thread_routes(platform: Platform) -> None:
    """The Tool Pod holds the runtime token but not the checkpoint store: it cannot read threads through
    the AER. Only the OE's signed statement opens the thread routes."""
    aer = f"http://127.0.0.1:{platform.aer_port}"
    for path in ("/threads/react-any/state", "/query/sessions", "/query/sessions/react-any/messages"):
        refused = httpx.get(aer + path, headers={"authorization": f"Bearer {RUNTIME_TOKEN}"})
        assert refused.status_code in (401, 403), (path, refused.status_code, refused.text)
    opened = httpx.get(aer + "/query/sessions", headers=platform.runtime_headers("aer"))
    assert opened.status_code == 200, opened.text
