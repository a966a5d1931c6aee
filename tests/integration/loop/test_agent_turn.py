"""A governed agent turn end to end: OE -> AER -> (OE -> Tool Pod | AER callback) -> OE, real processes."""

from __future__ import annotations

import concurrent.futures
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.conftest import Process
from tests.integration.loop.harness import (
    AGENT,
    CLIENT_TOKEN,
    LLM_KEY,
    OTHER_TOKEN,
    PLANTED,
    RUNTIME_TOKEN,
    Platform,
)
from tests.providers.llm_peer import RunningLLMPeer, Turn


def calls(*pairs: tuple[str, dict[str, object]], quiet: bool = False) -> dict[str, object]:
    return {"mode": "calls", "calls": [list(pair) for pair in pairs], "quiet": quiet}


def tool_records(platform: Platform, execution_id: str) -> list[dict[str, object]]:
    return [
        r
        for r in platform.audit(execution_id)
        if r["kind"] in ("tool", "llm") and r["decision"] != "callback_result"
    ]


def test_a_model_driven_turn_calls_tools_through_the_oe(platform: Platform, llm_peer: RunningLLMPeer) -> None:
    llm_peer.push(
        Turn.calls(("shout", {"text": "hello"}), ("word_count", {"text": "one two three"})),
        Turn.answer("HELLO has 3 words"),
    )
    execution_id = platform.invoke({"mode": "llm", "text": "shout hello and count one two three"})
    view = platform.wait(execution_id)
    assert view["status"] == "completed", view
    assert view["result"] == {"answer": "HELLO has 3 words"}
    assert view["step_count"] == 4  # llm, shout, word_count, llm
    # The model asked for both tools at once: they run concurrently, so records come in finishing order.
    records = sorted(tool_records(platform, execution_id), key=lambda r: r["step"])
    assert [(r["step"], r["tool"], r["route"]) for r in records] == [
        (1, "invoke_llm", "tool_pod"),
        (2, "shout", "tool_pod"),
        (3, "word_count", "callback"),
        (4, "invoke_llm", "tool_pod"),
    ]
    assert records[1]["pod_name"] == "loop-tool-0"
    # The model ran in the Tool Pod with the key (Decision 9) and saw both tool results.
    assert all(request.authorization == f"Bearer {LLM_KEY}" for request in llm_peer.requests)
    second = llm_peer.requests[1].body["messages"]
    tool_messages = [m for m in second if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in tool_messages] == [{"loud": "HELLO"}, {"words": 3}]
    assert "AGENTIC_LLM" not in platform.processes["aer"].output()


def test_tool_failures_and_denials_reach_the_agent_and_the_turn_goes_on(platform: Platform) -> None:
    execution_id = platform.invoke(
        calls(
            ("shout", {"text": "a"}),
            ("explode", {"text": "b"}),
            ("no_such_tool", {}),
            ("shout", {"wrong": 1}),
            ("echo_getItem", {"itemId": "42"}),
        )
    )
    view = platform.wait(execution_id)
    assert view["status"] == "completed", view
    results = view["result"]["results"]
    assert results[0] == {"loud": "A"}
    assert results[1]["error"] == "ToolExecutionError" and "tool_error" in results[1]["text"]
    assert results[2]["error"] == "PolicyDeniedException" and "unknown tool" in results[2]["text"]
    assert results[3]["error"] == "ToolExecutionError" and "invalid_arguments" in results[3]["text"]
    assert results[4]["status_code"] == 200
    decisions = [(r["step"], r["decision"]) for r in tool_records(platform, execution_id)]
    assert decisions == [(1, "allow"), (2, "allow"), (3, "deny"), (4, "allow"), (5, "allow")]


def test_policy_deny_list_and_approval_then_resume_runs_the_side_effect_once(
    tmp_path, spawn, llm_peer, provider_url
) -> None:
    platform = Platform(
        tmp=tmp_path,
        spawn=spawn,
        llm_base_url=llm_peer.base_url,
        provider_url=provider_url,
        policy={"deny": ["explode"]},
    ).start()
    task = calls(
        ("shout", {"text": "x"}), ("explode", {"text": "y"}), ("transfer", {"amount": 5, "to": "bob"})
    )
    execution_id = platform.invoke(task)
    view = platform.wait(execution_id)
    assert view["status"] == "suspended", view
    assert view["suspension"]["kind"] == "approval_required"
    assert view["suspension"]["tool"] == "transfer" and view["suspension"]["step"] == 3
    assert not platform.ledger.exists(), "nothing may run before the approval"
    with platform.client() as client:
        wrapped = client.post(
            f"/api/v1/projects/team-a/executions/{execution_id}/resume",
            json={"human_review": {"decision": "approved"}},
        )
        assert wrapped.status_code == 400 and "human_review" in wrapped.text
        wrong_project = client.post(
            f"/api/v1/projects/team-b/executions/{execution_id}/resume", json={"decision": "approved"}
        )
        assert wrong_project.status_code == 404
        resumed = client.post(
            f"/api/v1/projects/team-a/executions/{execution_id}/resume",
            json={"decision": "approved", "reviewer_notes": "fine"},
        )
        assert resumed.status_code == 202, resumed.text
        again = client.post(
            f"/api/v1/projects/team-a/executions/{execution_id}/resume", json={"decision": "approved"}
        )
        assert again.status_code == 409
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    assert view["runs"] == 2
    assert platform.ledger.read_text().splitlines() == ["5 bob"]
    assert view["result"]["results"][2] == {"ok": True, "entries": 1}
    records = tool_records(platform, execution_id)
    # Second run: step 1 answered from the cache, the denial asked again (policy may change), and the
    # approved call run when the replay reached it, once.
    assert [(r["step"], r["decision"]) for r in records] == [
        (1, "allow"),
        (2, "deny"),
        (3, "approval"),
        (1, "cached"),
        (2, "deny"),
        (3, "approved"),
    ]


def test_entrypoint_failure_is_a_classified_failed_execution(platform: Platform) -> None:
    execution_id = platform.invoke({"mode": "nonsense"})
    view = platform.wait(execution_id)
    assert view["status"] == "failed"
    assert view["error"]["category"] == "entrypoint_error"
    assert "ValueError" in view["error"]["explanation"]
    # The AER keeps serving: the next execution completes.
    assert platform.wait(platform.invoke(calls(("shout", {"text": "ok"}))))["status"] == "completed"


def test_tool_pod_unreachable_is_the_tools_failure(platform: Platform) -> None:
    platform.processes["tool"].stop()
    view = platform.wait(platform.invoke(calls(("shout", {"text": "a"}), ("word_count", {"text": "a b"}))))
    assert view["status"] == "completed", view
    first, second = view["result"]["results"]
    assert first["error"] == "ToolExecutionError" and "tool_pod_unreachable" in first["text"]
    assert second == {"words": 2}


def test_oe_killed_between_steps_loses_nothing_and_the_run_carries_on(platform: Platform) -> None:
    gate = platform.tmp / "gate"
    execution_id = platform.invoke(
        calls(
            ("shout", {"text": "before"}),
            ("wait_for_file", {"path": str(gate)}),
            ("shout", {"text": "after"}),
        )
    )
    deadline = time.monotonic() + 20
    while len(tool_records(platform, execution_id)) < 2:
        assert time.monotonic() < deadline, platform.outputs()
        time.sleep(0.05)
    before = platform.audit(execution_id)
    platform.processes["oe"].stop(sig=signal.SIGKILL)
    platform.start_oe()
    assert platform.audit(execution_id) == before
    gate.write_text("go")
    view = platform.wait(execution_id)
    assert view["status"] == "completed", view
    assert view["result"]["results"] == [{"loud": "BEFORE"}, {"seen": str(gate)}, {"loud": "AFTER"}]
    assert [r["step"] for r in tool_records(platform, execution_id)] == [1, 2, 3]


def test_aer_killed_mid_run_fails_the_execution_in_bounded_time(platform: Platform) -> None:
    gate = platform.tmp / "never"
    execution_id = platform.invoke(calls(("wait_for_file", {"path": str(gate)})))
    platform.wait(execution_id, "running")
    time.sleep(0.5)
    platform.processes["aer"].stop(sig=signal.SIGKILL)
    started = time.monotonic()
    view = platform.wait(execution_id, "failed", "completed", timeout=20)
    assert view["status"] == "failed"
    assert view["error"]["category"] == "aer_lost"
    assert time.monotonic() - started < 15


def test_runtime_api_guards(platform: Platform) -> None:
    gate = platform.tmp / "gate"
    execution_id = platform.invoke(calls(("wait_for_file", {"path": str(gate)})))
    platform.wait(execution_id, "running")
    runtime = {"authorization": f"Bearer {RUNTIME_TOKEN}"}
    other = {"authorization": f"Bearer {OTHER_TOKEN}"}
    with httpx.Client(base_url=platform.oe_url, timeout=30) as oe:
        call = {"execution_id": execution_id, "step": 50, "tool": "shout", "args": {"text": "dup"}}
        # Another Agent's token cannot touch this execution, and learns nothing about it.
        assert oe.post("/tool/execute", json=call, headers=other).status_code == 404
        assert (
            oe.post("/tool/execute", json={**call, "execution_id": "nope"}, headers=runtime).status_code
            == 404
        )
        assert oe.post("/tool/execute", json=call).status_code == 401
        assert (
            oe.post(
                "/tool/execute", json=call, headers={"authorization": f"Bearer {CLIENT_TOKEN}"}
            ).status_code
            == 401
        )
        bad = oe.post("/tool/execute", json={**call, "step": 0}, headers=runtime)
        assert bad.status_code == 400 and bad.json()["detail"][0]["field"] == "step"
        huge = oe.post("/tool/execute", content=b"x" * (9 * 1024 * 1024), headers=runtime)
        assert huge.status_code == 413
        # A retrying AER: two identical calls at once run once and get one answer.
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(
                pool.map(lambda _: oe.post("/tool/execute", json=call, headers=runtime).json(), range(2))
            )
        assert answers[0] == answers[1]
        assert answers[0]["result"] == {"loud": "DUP"}
        metrics = httpx.get(f"http://127.0.0.1:{platform.tool_port}/metrics").text
        shout_calls = [
            line
            for line in metrics.splitlines()
            if line.startswith("agent_runtime_tool_calls_total") and 'tool="shout"' in line
        ]
        assert shout_calls and shout_calls[0].endswith(" 1.0"), shout_calls
    gate.write_text("go")
    platform.wait(execution_id, "completed")
    with httpx.Client(base_url=platform.oe_url, timeout=30, headers=runtime) as oe:
        done = {
            "execution_id": execution_id,
            "status": "COMPLETED",
            "result": {"results": [{"seen": str(gate)}]},
        }
        assert oe.post("/executor/callback", json=done).status_code == 200
        conflict = oe.post("/executor/callback", json={"execution_id": execution_id, "status": "FAILED"})
        assert conflict.status_code == 409
    assert any(r["kind"] == "callback" and r["decision"] == "conflict" for r in platform.audit(execution_id))


def test_client_api_lists_filters_streams_and_cancels(platform: Platform) -> None:
    done = platform.invoke(calls(("shout", {"text": "a"})))
    platform.wait(done)
    gate = platform.tmp / "gate"
    held = platform.invoke(calls(("wait_for_file", {"path": str(gate)})))
    platform.wait(held, "running")
    with platform.client() as client:
        assert client.get("/execution/unknown").status_code == 404
        assert client.post("/invoke", json={"agent": "team-a/ghost"}).status_code == 404
        bad = client.post("/invoke", json={"agent": "Not An Agent"})
        assert bad.status_code == 400 and bad.json()["detail"][0]["field"] == "agent"
        page = client.get("/executions", params={"agent": AGENT, "limit": 1}).json()
        assert [item["execution_id"] for item in page["items"]] == [held]
        rest = client.get(
            "/executions", params={"agent": AGENT, "limit": 1, "cursor": page["next_cursor"]}
        ).json()
        assert [item["execution_id"] for item in rest["items"]] == [done]
        running = client.get("/executions", params={"status": "running"}).json()["items"]
        assert [item["execution_id"] for item in running] == [held]
        cancelled = client.post(f"/execution/{held}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        assert client.post(f"/execution/{held}/cancel").status_code == 409
        with client.stream("GET", f"/execution/{done}/events") as stream:
            kinds = [
                line.removeprefix("event: ") for line in stream.iter_lines() if line.startswith("event: ")
            ]
    assert kinds[0] == "created" and kinds[-1] == "completed"
    assert {"running", "step_started", "step_finished"} <= set(kinds)
    gate.write_text("go")  # the cancelled run's callback is refused and audited
    deadline = time.monotonic() + 10
    while not any(r["kind"] == "callback" for r in platform.audit(held)):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_no_secret_reaches_audit_events_answers_or_logs(platform: Platform, llm_peer: RunningLLMPeer) -> None:
    llm_peer.push(Turn.calls(("shout", {"text": RUNTIME_TOKEN})), Turn.answer("done"))
    ids = [
        platform.invoke({"mode": "llm", "text": "go"}),
        platform.invoke(
            calls(
                ("echo_getItem", {"itemId": "1"}),
                ("echo_leak", {"code": 500}),
                ("shout", {"text": f"token={RUNTIME_TOKEN} password=x", "password": LLM_KEY}),
                quiet=True,
            )
        ),
    ]
    seen = []
    with platform.client() as client:
        for execution_id in ids:
            platform.wait(execution_id)
            seen.append(client.get(f"/execution/{execution_id}").text)
            seen.append(client.get(f"/execution/{execution_id}/audit").text)
            with client.stream("GET", f"/execution/{execution_id}/events") as stream:
                seen.append("".join(stream.iter_text()))
        seen.append(client.get("/executions").text)
    for proc in platform.processes.values():
        proc.stop()
    seen.append(platform.outputs())
    text = "\n".join(seen)
    for secret in PLANTED:
        assert secret not in text, f"a planted secret leaked ({secret[:6]}...)"


def test_a_registration_without_tools_learns_them_from_the_aer(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> None:
    platform = Platform(
        tmp=tmp_path,
        spawn=spawn,
        llm_base_url=llm_peer.base_url,
        provider_url=provider_url,
        publish_tools=False,
    ).start()
    view = platform.wait(
        platform.invoke(
            calls(
                ("word_count", {"text": "a b c"}),
                ("shout", {"text": "x"}),
                ("no_such_tool", {}),
                ("transfer", {"amount": 1, "to": "z"}),
            )
        )
    )
    assert view["status"] == "suspended", view  # transfer is sensitive, as the AER's /tools says
    records = tool_records(platform, view["execution_id"])
    assert [(r["tool"], r["decision"], r["route"]) for r in records] == [
        ("word_count", "allow", "callback"),
        ("shout", "allow", "tool_pod"),
        ("no_such_tool", "deny", "none"),
        ("transfer", "approval", "none"),
    ]
