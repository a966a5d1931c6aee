"""`/tool/result` is idempotent: the same report twice is a no-op, a different one is a 409, and audited."""

from __future__ import annotations

import time

import httpx

from tests.integration.loop.harness import RUNTIME_TOKEN, Platform


def test_a_repeated_local_tool_result_changes_nothing_and_a_conflicting_one_is_refused(
    platform: Platform,
) -> None:
    gate = platform.tmp / "gate"
    task = {
        "mode": "calls",
        "calls": [["word_count", {"text": "a b"}], ["wait_for_file", {"path": str(gate)}]],
    }
    execution_id = platform.invoke(task)
    deadline = time.monotonic() + 20
    while not any(r["kind"] == "tool" and r.get("step") == 2 for r in platform.audit(execution_id)):
        assert time.monotonic() < deadline, platform.outputs()
        time.sleep(0.05)
    same = {"execution_id": execution_id, "step": 1, "status": "success", "result": {"words": 2}}
    with httpx.Client(
        base_url=platform.oe_url, headers={"authorization": f"Bearer {RUNTIME_TOKEN}"}, timeout=30
    ) as oe:
        before = platform.audit(execution_id)
        assert oe.post("/tool/result", json=same).status_code == 200
        assert platform.audit(execution_id) == before  # no second effect, no second record
        conflict = oe.post("/tool/result", json={**same, "result": {"words": 3}})
        assert conflict.status_code == 409 and conflict.json()["error"] == "step_final"
        assert oe.post("/tool/result", json={**same, "step": 99}).status_code == 404
    gate.write_text("go")
    view = platform.wait(execution_id)
    assert view["status"] == "completed"
    assert view["result"]["results"][0] == {"words": 2}
    assert [r["decision"] for r in platform.audit(execution_id) if r.get("step") == 1].count("conflict") == 1
