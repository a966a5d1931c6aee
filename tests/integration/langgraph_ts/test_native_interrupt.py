"""LangGraph's own interrupt() held in the OE, through the Python OE and the TS AER and Tool Pod: the node's
interrupt stops the graph, the OE holds it as a step of kind `interrupt` (a reviewer may send a value), the
approved resume replays the turn from the cache to the interrupt and continues with the reviewer's value,
and the tool after it runs once; a rejection fails the turn naming the notes, runs nothing after the
interrupt, and leaves the session's thread usable."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Process
from tests.integration.langgraph_ts.example_platform import ExamplePlatform, example_platform, sdk_tenant
from tests.providers.ledger_provider import RunningLedger
from tests.providers.llm_peer import RunningLLMPeer

pytestmark = pytest.mark.integration


def _platform(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, ledger: RunningLedger
) -> ExamplePlatform:
    tenant = sdk_tenant("interrupt_agent")
    tenant = type(tenant)(
        entrypoint=tenant.entrypoint,
        pythonpath=tenant.pythonpath,
        bundle=tenant.bundle,
        tool_env={"REFUND_PROVIDER_URL": ledger.url},
    )
    env = {"CHECKPOINT_STORE": "sqlite", "CHECKPOINT_SQLITE_PATH": str(tmp_path / "cp.sqlite3")}
    return example_platform(
        tmp_path,
        spawn,
        llm_base_url=llm_peer.base_url,
        refund_url=ledger.url,
        checkpoint_env=env,
        tenant=tenant,
    )


def _invoke(platform: ExamplePlatform) -> str:
    with platform.client() as client:
        response = client.post(
            "/invoke",
            json={
                "agent": "team-a/loop",
                "session_id": "desk-7",
                "input": {"messages": [{"role": "user", "content": "reply"}]},
            },
        )
    assert response.status_code == 202, response.text
    return str(response.json()["execution_id"])


def _resume(platform: ExamplePlatform, execution_id: str, body: dict[str, Any]) -> None:
    with platform.client() as client:
        response = client.post(f"/api/v1/projects/team-a/executions/{execution_id}/resume", json=body)
    assert response.status_code == 202, response.text


def test_an_approved_interrupt_returns_the_reviewers_value_and_the_next_tool_runs_once(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, ledger: RunningLedger
) -> None:
    platform = _platform(tmp_path, spawn, llm_peer, ledger)
    execution_id = _invoke(platform)
    view = platform.wait(execution_id, timeout=60)
    assert view["status"] == "suspended", f"{view}\n{platform.outputs()}"
    with platform.client() as client:
        reviews = client.get("/api/v1/projects/team-a/reviews").json()
    held = [r for r in reviews["items"] if r["execution_id"] == execution_id]
    assert len(held) == 1 and held[0]["may_send_value"] is True, reviews
    asks = held[0]["asks"]
    assert (asks["kind"], asks["step"]) == ("interrupt", 2), asks
    assert asks["payload"] == {"question": "send this reply?", "draft": "We will refund B200."}
    assert ledger.effects("reply-1") == []

    _resume(platform, execution_id, {"decision": "approved", "value": {"text": "Your refund is on its way."}})
    view = platform.wait(execution_id, "completed", "failed", timeout=60)
    assert view["status"] == "completed", f"{view}\n{platform.outputs()}"
    assert view["result"]["messages"][-1]["content"] == "sent: Your refund is on its way."
    assert view["result"]["approved"] == "Your refund is on its way."
    assert len(ledger.effects("reply-1")) == 1 and ledger.duplicates("reply-1") == 0


def test_a_rejected_interrupt_fails_the_turn_with_the_notes_and_runs_nothing_after_it(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, ledger: RunningLedger
) -> None:
    platform = _platform(tmp_path, spawn, llm_peer, ledger)
    execution_id = _invoke(platform)
    assert platform.wait(execution_id, timeout=60)["status"] == "suspended"
    _resume(platform, execution_id, {"decision": "rejected", "reviewer_notes": "too curt"})
    view = platform.wait(execution_id, "completed", "failed", timeout=60)
    assert view["status"] == "failed", view
    assert "too curt" in view["error"]["explanation"], view["error"]
    assert ledger.effects("reply-1") == []
    # The session's thread is still usable: the next turn runs (and stops at its own interrupt).
    assert platform.wait(_invoke(platform), timeout=60)["status"] == "suspended"


def test_app_suspend_in_a_node_holds_the_run_and_returns_the_decision_on_resume(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, ledger: RunningLedger
) -> None:
    env = {"CHECKPOINT_STORE": "sqlite", "CHECKPOINT_SQLITE_PATH": str(tmp_path / "cp.sqlite3")}
    platform = example_platform(
        tmp_path,
        spawn,
        llm_base_url=llm_peer.base_url,
        refund_url=ledger.url,
        checkpoint_env=env,
        tenant=sdk_tenant("suspend_agent"),
    )
    execution_id = _invoke(platform)
    view = platform.wait(execution_id, timeout=60)
    assert view["status"] == "suspended", f"{view}\n{platform.outputs()}"
    assert view["suspension"]["reason"] == "a refund above 100 EUR needs a manager", view["suspension"]
    _resume(platform, execution_id, {"decision": "approved", "reviewer_notes": "fine, loyal customer"})
    view = platform.wait(execution_id, "completed", "failed", timeout=60)
    assert view["status"] == "completed", f"{view}\n{platform.outputs()}"
    assert view["result"]["messages"][-1]["content"] == "manager said approved: fine, loyal customer"
    # The tenant's resolver keyed the thread, verbatim, for the new run and its resume alike (LG-05).
    with sqlite3.connect(tmp_path / "cp.sqlite3") as db:
        threads = {row[0] for row in db.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert threads == {"desk-7__anonymous"}, threads


@pytest.mark.parametrize("decision", ["approved", "rejected"])
def test_a_static_breakpoint_is_held_and_only_an_approval_runs_the_node_after_it(
    decision: str,
    tmp_path: Path,
    spawn: Callable[..., Process],
    llm_peer: RunningLLMPeer,
    ledger: RunningLedger,
) -> None:
    tenant = sdk_tenant("breakpoint_agent")
    tenant = type(tenant)(
        entrypoint=tenant.entrypoint,
        pythonpath=tenant.pythonpath,
        bundle=tenant.bundle,
        tool_env={"REFUND_PROVIDER_URL": ledger.url},
    )
    env = {"CHECKPOINT_STORE": "sqlite", "CHECKPOINT_SQLITE_PATH": str(tmp_path / "cp.sqlite3")}
    platform = example_platform(
        tmp_path,
        spawn,
        llm_base_url=llm_peer.base_url,
        refund_url=ledger.url,
        checkpoint_env=env,
        tenant=tenant,
    )
    execution_id = _invoke(platform)
    view = platform.wait(execution_id, timeout=60)
    assert view["status"] == "suspended", f"{view}\n{platform.outputs()}"
    with platform.client() as client:
        items = client.get("/api/v1/projects/team-a/reviews").json()["items"]
    asks = next(item for item in items if item["execution_id"] == execution_id)["asks"]
    assert (asks["kind"], asks["step"], asks["payload"]) == ("breakpoint", 2, {"next": ["send"]}), asks
    assert ledger.effects("reply-2") == []
    _resume(platform, execution_id, {"decision": decision, "reviewer_notes": "checked"})
    view = platform.wait(execution_id, "completed", "failed", timeout=60)
    if decision == "approved":
        assert view["status"] == "completed", f"{view}\n{platform.outputs()}"
        assert view["result"]["messages"][-1]["content"] == "sent: We shipped it again."
        assert len(ledger.effects("reply-2")) == 1
    else:
        assert view["status"] == "failed", view
        assert "breakpoint at step 2: checked" in view["error"]["explanation"], view["error"]
        assert ledger.effects("reply-2") == []
