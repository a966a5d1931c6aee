"""A governed turn through the TypeScript runner: the Python OE, the TS AER (SecureToolWrapper,
SecureWrappedLLM) and the TS Tool Pod (tenant tools, the bundle's OpenAPI connector, the model), real
processes on loopback, an OpenAI-compatible model peer and the echo provider."""

from __future__ import annotations

import json
import signal
import time

from tests.integration.loop.harness import LLM_KEY, PLANTED
from tests.integration.ts_runner.node_platform import LOOP_SECRET, NodePlatform
from tests.providers.llm_peer import RunningLLMPeer, Turn


def calls(*pairs: tuple[str, dict[str, object]]) -> dict[str, object]:
    return {"mode": "calls", "calls": [list(pair) for pair in pairs]}


def tool_records(platform: NodePlatform, execution_id: str) -> list[dict[str, object]]:
    return [
        r
        for r in platform.audit(execution_id)
        if r["kind"] in ("tool", "llm") and r["decision"] != "callback_result"
    ]


def ledger(platform: NodePlatform) -> list[str]:
    return platform.ledger.read_text().splitlines() if platform.ledger.exists() else []


def test_a_model_driven_turn_calls_tools_through_the_oe(
    platform: NodePlatform, llm_peer: RunningLLMPeer
) -> None:
    llm_peer.push(
        Turn.calls(("shout", {"text": "hello"}), ("word_count", {"text": "one two three"})),
        Turn.answer("HELLO has 3 words"),
    )
    execution_id = platform.invoke({"mode": "llm", "text": "shout hello and count one two three"})
    view = platform.wait(execution_id)
    assert view["status"] == "completed", view
    assert view["result"] == {"answer": "HELLO has 3 words"}
    records = sorted(tool_records(platform, execution_id), key=lambda r: int(str(r["step"])))
    assert [(r["step"], r["tool"], r["route"]) for r in records] == [
        (1, "invoke_llm", "tool_pod"),
        (2, "shout", "tool_pod"),
        (3, "word_count", "callback"),
        (4, "invoke_llm", "tool_pod"),
    ]
    assert records[1]["pod_name"] == "loop-tool-0"
    # The model ran in the TS Tool Pod with the key (Decision 9) and saw both tool results.
    assert all(request.authorization == f"Bearer {LLM_KEY}" for request in llm_peer.requests)
    second = llm_peer.requests[1].body["messages"]
    tool_messages = [json.loads(m["content"]) for m in second if m["role"] == "tool"]
    assert tool_messages == [{"loud": "HELLO"}, {"words": 3}]
    assert "AGENTIC_LLM" not in platform.processes["aer"].output()


def test_failures_denials_and_the_bundles_connector_reach_the_agent(platform: NodePlatform) -> None:
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
    assert "exploded on b" not in results[1]["text"], "a body's message stays in the Tool Pod's log"
    assert results[2]["error"] == "PolicyDeniedException" and "unknown tool" in results[2]["text"]
    assert results[3]["error"] == "ToolExecutionError" and "invalid_arguments" in results[3]["text"]
    # The OpenAPI connector of the operator's bundle, run by the TS Tool Pod with its credential from env.
    assert results[4]["status_code"] == 200, results[4]
    decisions = [(r["step"], r["decision"]) for r in tool_records(platform, execution_id)]
    assert decisions == [(1, "allow"), (2, "allow"), (3, "deny"), (4, "allow"), (5, "allow")]


def test_a_sensitive_tool_is_held_approved_and_run_once(platform: NodePlatform) -> None:
    execution_id = platform.invoke(calls(("shout", {"text": "x"}), ("transfer", {"amount": 5, "to": "bob"})))
    view = platform.wait(execution_id)
    assert view["status"] == "suspended", view
    assert view["suspension"]["step"] == 2 and view["suspension"]["tool"] == "transfer"
    assert ledger(platform) == []
    with platform.client() as client:
        resumed = client.post(f"/resume/{execution_id}", json={"human_review": {"decision": "approved"}})
        assert resumed.status_code == 202, resumed.text
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    assert view["result"]["results"] == [{"loud": "X"}, {"ok": True, "entries": 1}]
    assert ledger(platform) == ["5 bob"], "the approved side effect ran exactly once"
    replayed = [(r["step"], r["tool"], r["decision"]) for r in tool_records(platform, execution_id)][2:]
    assert replayed[0] == (1, "shout", "cached")


def test_a_tool_that_suspends_is_resumed_with_the_decision(platform: NodePlatform) -> None:
    execution_id = platform.invoke({"mode": "review"})
    view = platform.wait(execution_id)
    assert view["status"] == "suspended", view
    assert (view["suspension"]["step"], view["suspension"]["tool"]) == (1, "ask_human")
    with platform.client() as client:
        body = {"human_review": {"decision": "approved", "reviewer_notes": "go"}}
        assert client.post(f"/resume/{execution_id}", json=body).status_code == 202
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    assert view["result"]["sent"] == {"sent": "claims approved"}
    assert ledger(platform) == ["notify claims approved"]


def test_agent_code_suspends_and_the_resumed_run_gets_the_decision(platform: NodePlatform) -> None:
    execution_id = platform.invoke({"mode": "review", "agent_level": True})
    view = platform.wait(execution_id)
    assert view["status"] == "suspended", view
    assert (view["suspension"]["step"], view["suspension"]["tool"]) == (1, "app.suspend")
    with platform.client() as client:
        body = {"human_review": {"decision": "rejected"}}
        assert client.post(f"/resume/{execution_id}", json=body).status_code == 202
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    assert view["result"]["decision"] == {"decision": "rejected", "reviewer_notes": None}
    assert ledger(platform) == ["notify claims rejected"]


def test_the_tool_pods_secrets_never_leave_it(platform: NodePlatform) -> None:
    """Attacker: a tenant tool prints the Tool Pod's secret (console.log, console.error in base64, raw bytes
    on stdout) and returns it raw and base64-encoded; none of it reaches the OE, the AER or any log."""
    execution_id = platform.invoke(calls(("leak", {})))
    view = platform.wait(execution_id)
    assert view["status"] == "completed", view
    text = json.dumps(view)
    assert LOOP_SECRET not in text and "dHMtbG9vcC1zZWNyZXQ" not in text
    assert view["result"]["results"][0]["value"] == "[REDACTED]"
    outputs = platform.outputs()
    assert "the secret is [REDACTED]" in outputs and "raw bytes [REDACTED]" in outputs, "the prints happened"
    for planted in (*PLANTED, LOOP_SECRET, "dHMtbG9vcC1zZWNyZXQ"):
        assert planted not in outputs, "a secret reached a log line"


def test_sigterm_lets_the_run_in_flight_finish_then_the_aer_exits_0(platform: NodePlatform) -> None:
    """The process's shutdown (not a drain): it stops listening, the run in flight finishes and calls back."""
    release = platform.tmp / "release"
    execution_id = platform.invoke(
        calls(("wait_for_file", {"path": str(release)}), ("shout", {"text": "after"}))
    )
    deadline = time.monotonic() + 20
    while not any(r["tool"] == "wait_for_file" for r in tool_records(platform, execution_id)):
        assert time.monotonic() < deadline, platform.outputs()
        time.sleep(0.05)
    aer = platform.processes["aer"].popen
    aer.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert aer.poll() is None, "the AER waits for its run in flight"
    release.write_text("go")
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    assert view["result"]["results"] == [{"seen": str(release)}, {"loud": "AFTER"}]
    assert aer.wait(timeout=20) == 0
    assert "SIGTERM: shutting down aer" in platform.processes["aer"].output()


def test_a_connector_test_is_answered_by_the_ts_tool_pod_through_the_oe(platform: NodePlatform) -> None:
    with platform.client() as client:
        found = client.post("/api/v1/projects/team-a/agents/loop/connectors/echo/test")
        missing = client.post("/api/v1/projects/team-a/agents/loop/connectors/nope/test")
    assert found.status_code == 200, found.text
    assert found.json()["ok"] is True and "no connection test" in found.json()["detail"]
    assert missing.status_code == 404 and missing.json()["error"] == "connector_not_found"
