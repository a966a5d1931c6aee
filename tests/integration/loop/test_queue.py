"""onLimit: queue (issue 34) end to end, with the real OE, AER and Tool Pod: an `/invoke` over
maxConcurrentExecutions is accepted as `queued`, queued executions start oldest first when a slot frees,
the queue survives an OE restart (it is in the store), and a queued execution can be cancelled."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.loop.harness import AGENT, Platform, platform_on_peers

pytestmark = pytest.mark.integration

LIMITS = {"maxConcurrentExecutions": 1, "onLimit": "queue"}


@pytest.fixture(scope="module")
def platform(module_spawn: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    tmp = tmp_path_factory.mktemp("queue")
    with platform_on_peers(tmp=tmp, spawn=module_spawn, registration={"limits": LIMITS}) as loop:
        yield loop.start()


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"mode": "calls", "calls": [list(pair) for pair in pairs]}


def invoke(platform: Platform, task: dict[str, Any]) -> tuple[str, str]:
    with platform.client() as client:
        response = client.post("/invoke", json={"agent": AGENT, "input": task})
    assert response.status_code == 202, response.text
    return response.json()["execution_id"], response.json()["status"]


def status(platform: Platform, execution_id: str) -> str:
    with platform.client() as client:
        return str(client.get(f"/execution/{execution_id}").json()["status"])


def test_over_the_limit_executions_wait_queued_and_start_oldest_first_across_an_oe_restart(
    platform: Platform,
) -> None:
    first_gate, second_gate = platform.tmp / "first", platform.tmp / "second"
    first, state = invoke(platform, calls(("wait_for_file", {"path": str(first_gate)})))
    assert state == "pending"
    platform.wait(first, "running")
    # Over the limit: accepted (202), queued, not a 429.
    second, state = invoke(platform, calls(("wait_for_file", {"path": str(second_gate)})))
    assert state == "queued"
    third, state = invoke(platform, calls(("shout", {"text": "third"})))
    assert state == "queued"
    with platform.client() as client:
        listed = client.get("/executions", params={"status": "queued"}).json()
    assert {item["execution_id"] for item in listed["items"]} >= {second, third}
    assert status(platform, second) == "queued" and status(platform, third) == "queued"
    assert not [r for r in platform.audit(second) if r["kind"] == "tool"]  # nothing of it ran

    # The queue is in the store: an OE killed and started again still has it, in order.
    platform.processes["oe"].stop(sig=signal.SIGKILL)
    platform.start_oe()
    assert status(platform, second) == "queued" and status(platform, third) == "queued"

    first_gate.write_text("go")
    assert platform.wait(first, "completed", "failed")["status"] == "completed"
    # The slot goes to the oldest: the second runs, the third (newer, and quicker) still waits.
    platform.wait(second, "running", "completed", "failed")
    assert status(platform, third) == "queued"
    second_gate.write_text("go")
    assert platform.wait(second, "completed", "failed")["status"] == "completed"
    view = platform.wait(third, "completed", "failed")
    assert view["status"] == "completed", view
    assert view["result"]["results"] == [{"loud": "THIRD"}]


def test_a_queued_execution_can_be_cancelled_and_never_runs(platform: Platform) -> None:
    gate = platform.tmp / "hold"
    holder, _ = invoke(platform, calls(("wait_for_file", {"path": str(gate)})))
    platform.wait(holder, "running")
    waiting, state = invoke(platform, calls(("shout", {"text": "never"})))
    assert state == "queued"
    with platform.client() as client:
        cancelled = client.post(f"/execution/{waiting}/cancel")
    assert cancelled.status_code in (200, 202), cancelled.text
    assert status(platform, waiting) == "cancelled"
    gate.write_text("go")
    assert platform.wait(holder, "completed", "failed")["status"] == "completed"
    assert status(platform, waiting) == "cancelled"
    assert not [r for r in platform.audit(waiting) if r["kind"] == "tool"]
