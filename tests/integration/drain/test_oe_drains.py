"""The OE's side of drain and interrupt/call against the real AER and Tool Pod (OE-17, OE-18, Decision 8).

A client's cancel becomes a durable drain record; the OE drains every runtime that served the execution, at
the address each pod reported, with one request_id and one deadline, until each answers; only `completed`
is quiet; an OE killed meanwhile carries on after its restart. A client's interrupt stops one call.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Process
from tests.integration.drain.harness import DrainPlatform, start_platform


@pytest.fixture
def platform(tmp_path: Path, spawn: Callable[..., Process]) -> Iterator[DrainPlatform]:
    yield start_platform(tmp_path / "platform", spawn, {})


class Turn:
    """One execution of the drain tenant: its plan's files, and the OE's views of it."""

    def __init__(self, platform: DrainPlatform, workdir: Path, plan: list[list[tuple[int, str]]]) -> None:
        self.platform = platform
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        groups = [[{"tool": tool, "args": self.args(step, tool)} for step, tool in group] for group in plan]
        self.execution_id = platform.invoke({"plan": groups})

    def args(self, step: int, tool: str) -> dict[str, str]:
        marker = str(self.workdir / f"{step}.started")
        return (
            {"marker": marker}
            if tool.endswith("quick")
            else {"marker": marker, "release": self.release_file(step)}
        )

    def release_file(self, step: int) -> str:
        return str(self.workdir / f"{step}.release")

    def started(self, step: int) -> bool:
        return (self.workdir / f"{step}.started").exists()

    def wait_started(self, *steps: int, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not all(self.started(step) for step in steps):
            assert time.monotonic() < deadline, f"steps {steps} never started:\n{self.platform.outputs()}"
            time.sleep(0.02)

    def release(self, step: int) -> None:
        Path(self.release_file(step)).touch()

    def get(self, path: str = "") -> httpx.Response:
        with self.platform.client() as client:
            return client.get(f"/execution/{self.execution_id}{path}")

    def post(self, path: str, body: Any = None) -> httpx.Response:
        with self.platform.client() as client:
            return client.post(f"/execution/{self.execution_id}{path}", json=body)

    def until(
        self, path: str, done: Callable[[dict[str, Any]], bool], *, timeout: float = 20
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            response = self.get(path)
            if response.status_code == 200 and done(response.json()):
                return dict(response.json())
            assert time.monotonic() < deadline, f"{path}: {response.text}\n{self.platform.outputs()}"
            time.sleep(0.05)

    def steps(self) -> dict[int, dict[str, Any]]:
        """Each step's final audit record (what its call answered the OE)."""
        final = {}
        for record in self.platform.audit(self.execution_id):
            if record["kind"] == "tool" and record["status"] in ("success", "error", "suspend"):
                final[record["step"]] = record
        return final


def by_component(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {target["component"]: target for target in view["targets"]}


def test_a_cancel_drains_every_runtime_that_served_it_at_the_pod_that_answered(
    platform: DrainPlatform, tmp_path: Path
) -> None:
    # Step 1 runs in the Tool Pod (which names itself in its answer); then the AER and the Tool Pod each
    # hold a cooperative body when the client cancels.
    turn = Turn(
        platform, tmp_path / "t", [[(1, "pod_quick")], [(2, "aer_hold_async"), (3, "pod_hold_async")]]
    )
    turn.wait_started(2, 3)
    cancelled = turn.post("/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"

    view = turn.until("/drain", lambda v: v["state"] != "open")
    assert (view["state"], view["outcome"], view["reason"]) == (
        "quiet",
        "completed",
        "cancelled by the client",
    )
    targets = by_component(view)
    assert targets["aer"] | {"attempts": 0} == {
        "component": "aer",
        "address": platform.aer_url,
        "pod_name": "loop-aer-0",
        "outcome": "completed",
        "reason_code": None,
        "attempts": 0,
    }
    assert (targets["tool"]["address"], targets["tool"]["pod_name"]) == (platform.tool_url, "loop-tool-0")
    assert targets["tool"]["outcome"] == "completed"
    assert view["deadline_at_ms"] > int(time.time() * 1000) - 60_000

    # The Tool Pod's call was cancelled by the drain and said so; neither body ran to its end.
    steps = turn.steps()
    assert steps[3]["error_category"] == "execution_drained"
    assert not Path(turn.release_file(2)).exists() and not Path(turn.release_file(3)).exists()
    audit = [r for r in platform.audit(turn.execution_id) if r["kind"] == "drain"]
    assert [(r["decision"], r["status"]) for r in audit] == [("quiet", "completed")]

    # Both runtimes hold the drain: a new run or call of the execution is refused at admission.
    # (Playing the OE: its signed statement for each runtime, issue 27.)
    rerun = httpx.post(
        f"{platform.aer_url}/execute",
        json={"execution_id": turn.execution_id, "workspace_id": "team-a.loop", "input": {}},
        headers=platform.runtime_headers("aer", execution_id=turn.execution_id),
    )
    assert (rerun.status_code, rerun.json()["error"]) == (409, "execution_draining")
    call = httpx.post(
        f"{platform.tool_url}/execute",
        json={
            "tool": "pod_quick",
            "arguments": {"marker": str(tmp_path / "late")},
            "execution_id": turn.execution_id,
            "step": 9,
        },
        headers=platform.runtime_headers("tool", execution_id=turn.execution_id),
    ).json()
    assert (call["status"], call["error"]["category"]) == ("error", "execution_draining")
    assert not (tmp_path / "late").exists()

    # A second cancel is a 409; the one drain stays as it is.
    assert turn.post("/cancel").status_code == 409
    assert turn.get("/drain").json()["request_id"] == view["request_id"]


def test_a_call_in_flight_on_a_pod_nobody_knew_yet_joins_the_drain_when_it_answers(
    platform: DrainPlatform, tmp_path: Path
) -> None:
    # The only Tool Pod call is in flight when the cancel comes: the OE learns its pod from its answer.
    turn = Turn(platform, tmp_path / "t", [[(1, "pod_hold_async")]])
    turn.wait_started(1)
    assert turn.post("/cancel").status_code == 200
    view = turn.until("/drain", lambda v: by_component(v).get("aer", {}).get("outcome") == "completed")
    assert view["state"] == "open"  # the OE still waits on that call
    assert "tool" not in by_component(view)
    turn.release(1)
    view = turn.until("/drain", lambda v: v["state"] != "open")
    assert view["state"] == "quiet"
    assert by_component(view)["tool"]["outcome"] == "completed"
    assert by_component(view)["tool"]["pod_name"] == "loop-tool-0"


def test_the_drain_carries_on_after_an_oe_restart_with_the_same_request_and_deadline(
    platform: DrainPlatform, tmp_path: Path
) -> None:
    # A sync body in the AER outlives the OE: the drain stays accepted until its thread ends.
    turn = Turn(platform, tmp_path / "t", [[(1, "pod_quick")], [(2, "aer_hold_sync")]])
    turn.wait_started(2)
    assert turn.post("/cancel").status_code == 200
    before = turn.until("/drain", lambda v: by_component(v)["aer"]["outcome"] == "accepted")
    assert before["state"] == "open"

    platform.processes["oe"].stop(sig=signal.SIGKILL)
    turn.release(2)
    platform.start_oe()

    after = turn.until("/drain", lambda v: v["state"] != "open")
    assert after["state"] == "quiet"
    assert (after["request_id"], after["deadline_at_ms"]) == (before["request_id"], before["deadline_at_ms"])
    assert by_component(after)["aer"]["attempts"] > by_component(before)["aer"]["attempts"]
    # The AER ran one drain for it: every request, before and after the restart, carried one request_id.
    aer_log = platform.processes["aer"].output()
    assert aer_log.count(f"drain {before['request_id']} of execution {turn.execution_id} accepted") == 1
    assert aer_log.count(f"of execution {turn.execution_id} accepted") == 1


def test_only_completed_is_quiet_a_runtime_that_lost_its_state_ends_the_drain_unconfirmed(
    platform: DrainPlatform, tmp_path: Path
) -> None:
    turn = Turn(platform, tmp_path / "t", [[(1, "pod_quick")], [(2, "aer_hold_async")]])
    turn.wait_started(2)
    platform.processes["tool"].stop(sig=signal.SIGKILL)
    assert turn.post("/cancel").status_code == 200
    retrying = turn.until("/drain", lambda v: by_component(v)["tool"]["attempts"] >= 2)
    assert retrying["state"] == "open"
    assert by_component(retrying)["tool"]["problem"] == "ClientConnectorError"
    assert by_component(retrying)["aer"]["outcome"] == "completed"

    platform.start_tool_pod()  # a new process: it never served this execution
    view = turn.until("/drain", lambda v: v["state"] != "open")
    assert (view["state"], view["outcome"]) == ("unconfirmed", "delivery_failed")
    tool = by_component(view)["tool"]
    assert (tool["outcome"], tool["reason_code"]) == ("delivery_failed", "execution_not_found")


def test_the_retry_window_ends_a_drain_unconfirmed(tmp_path: Path, spawn: Callable[..., Process]) -> None:
    platform = start_platform(tmp_path / "platform", spawn, {})
    platform.processes["oe"].stop()
    platform.start_oe(extra={"OE_DRAIN_RETRY_WINDOW_S": "3"})
    turn = Turn(platform, tmp_path / "t", [[(1, "pod_quick")], [(2, "aer_hold_async")]])
    turn.wait_started(2)
    platform.processes["tool"].stop(sig=signal.SIGKILL)
    assert turn.post("/cancel").status_code == 200
    view = turn.until("/drain", lambda v: v["state"] != "open", timeout=15)
    assert (view["state"], view["outcome"]) == ("unconfirmed", "expired")
    assert by_component(view)["tool"]["outcome"] == "expired"
    assert by_component(view)["aer"]["outcome"] == "completed"


def test_an_interrupt_stops_one_call_and_the_run_goes_on(platform: DrainPlatform, tmp_path: Path) -> None:
    turn = Turn(
        platform,
        tmp_path / "t",
        [[(1, "pod_quick")], [(2, "pod_hold_async")], [(3, "aer_hold_async")], [(4, "pod_quick")]],
    )
    turn.wait_started(2)
    asked = turn.post("/interrupt", {"step": 2})
    assert asked.status_code == 202, asked.text
    assert (asked.json()["kind"], asked.json()["step"]) == ("interrupt", 2)
    first = turn.until("/interrupts/2", lambda v: v["state"] != "open")
    assert (first["state"], first["outcome"]) == ("done", "interrupted")
    # A remote tool's call runs in the Tool Pod: the interrupt goes to the pod that served it, and only there.
    assert [(t["component"], t["pod_name"], t["outcome"]) for t in first["targets"]] == [
        ("tool", "loop-tool-0", "interrupted")
    ]

    # A local body in the AER, interrupted the same way.
    turn.wait_started(3)
    assert turn.post("/interrupt", {"step": 3}).status_code == 202
    view = turn.until("/interrupts/3", lambda v: v["state"] != "open")
    assert [(t["component"], t["pod_name"], t["outcome"]) for t in view["targets"]] == [
        ("aer", "loop-aer-0", "interrupted")
    ]

    final = platform.wait(turn.execution_id, "completed")
    results = final["result"]["results"]
    assert results[0] == {"ok": True} and results[3] == {"ok": True}  # no admission latch, ever
    assert [results[1]["error"], results[2]["error"]] == ["ToolExecutionError", "ToolExecutionError"]
    assert "interrupted" in results[1]["text"] and "interrupted" in results[2]["text"]
    steps = turn.steps()
    assert (steps[2]["error_category"], steps[3]["error_category"]) == ("interrupted", "interrupted")

    # A finished execution has no calls to interrupt; the record stays as it ended.
    assert turn.post("/interrupt", {"step": 2}).status_code == 409
    assert turn.get("/interrupts/2").json() == first


def test_interrupt_and_drain_client_errors(platform: DrainPlatform, tmp_path: Path) -> None:
    turn = Turn(platform, tmp_path / "t", [[(1, "pod_hold_async")]])
    turn.wait_started(1)
    for body, field in [
        (None, "(body)"),
        ({"step": 0}, "step"),
        ({"step": "two"}, "step"),
        ({"step": 1, "x": 1}, "x"),
    ]:
        response = turn.post("/interrupt", body)
        assert response.status_code == 400, response.text
        assert field in {problem["field"] for problem in response.json()["detail"]}
    assert turn.get("/drain").json()["error"] == "drain_not_found"
    assert turn.get("/interrupts/7").json()["error"] == "interrupt_not_found"
    with platform.client() as client:
        assert client.post("/execution/nobody/interrupt", json={"step": 1}).status_code == 404
        assert client.get("/execution/nobody/drain").status_code == 404
    with platform.client(token="not-the-client-token") as client:
        assert client.post(f"/execution/{turn.execution_id}/interrupt", json={"step": 1}).status_code == 401
    turn.release(1)
    platform.wait(turn.execution_id, "completed")
