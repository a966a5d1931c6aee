"""The Tool Pod runs a call resent under the same (execution, step) once, and tells its body the key."""

from __future__ import annotations

import concurrent.futures

import httpx

from tests.integration.loop.harness import Platform


def test_the_tool_pod_runs_a_resent_call_once_and_answers_it_the_same(platform: Platform) -> None:
    body = {
        "tool": "transfer",
        "arguments": {"amount": 3, "to": "ann"},
        "execution_id": "e-resent",
        "step": 4,
    }
    with httpx.Client(
        base_url=f"http://127.0.0.1:{platform.tool_port}",
        # Playing the OE: its statement for this execution (issue 27: the runtime token opens no Tool Pod).
        headers=platform.runtime_headers("tool", execution_id="e-resent"),
        timeout=30,
    ) as pod:
        # An OE that died mid-call and its successor: the same call twice at once, then once more later.
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first, second = pool.map(lambda _: pod.post("/execute", json=body).json(), range(2))
        third = pod.post("/execute", json=body).json()
        assert first == second == third and first["result"] == {"ok": True, "entries": 1}
        assert platform.ledger.read_text().splitlines() == ["3 ann"]
        # Another step, or the same step with other arguments, is another call.
        assert pod.post("/execute", json={**body, "step": 5}).json()["result"]["entries"] == 2
        changed = {**body, "arguments": {"amount": 4, "to": "ann"}}
        assert pod.post("/execute", json=changed).json()["result"]["entries"] == 3
        # A call without an execution (not the OE's) is never remembered.
        direct = {"tool": "transfer", "arguments": {"amount": 1, "to": "bo"}}
        control = platform.runtime_headers("tool")  # a statement for no execution
        assert pod.post("/execute", json=direct, headers=control).json()["result"]["entries"] == 4
        assert pod.post("/execute", json=direct, headers=control).json()["result"]["entries"] == 5
    assert "already run here" in platform.processes["tool"].output()


def test_a_tool_body_knows_its_idempotency_key(platform: Platform) -> None:
    execution_id = platform.invoke(
        {"mode": "calls", "calls": [["key_of_call", {}], ["local_key_of_call", {}]]}
    )
    view = platform.wait(execution_id)
    assert view["status"] == "completed", view
    assert view["result"]["results"] == [{"key": f"{execution_id}:1"}, {"key": f"{execution_id}:2"}]
