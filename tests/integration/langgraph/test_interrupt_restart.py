"""An AER lost after a graph-native interrupt() hold was resumed (issue 39), through real OE, AER and Tool
Pod processes: the OE starts the run again and the new AER continues from the hold's checkpoint with the
reviewer's recorded answer, so the node is answered again, not asked anew, and the side effect after it
runs once. The graph is `ask_then_ship` in tenant/lg_patterns.py; checkpoints in SQLite outlive the AER."""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from tests.integration.langgraph.test_langgraph_patterns import PROJECT, TENANT, PatternsPlatform, _bundle
from tests.integration.loop.harness import LLM_KEY, Tenant
from tests.integration.runtime.launched import CONNECTOR_SECRET
from tests.providers.llm_peer import RunningLLMPeer, running_llm_peer

pytestmark = pytest.mark.integration


class RestartPlatform(PatternsPlatform):
    def start_oe(self, *, extra: Mapping[str, str] | None = None) -> None:
        # The restarted AER imports LangGraph again: the OE waits for it instead of failing the run.
        super().start_oe(extra={"OE_AER_LOST_AFTER_S": "60", **(extra or {})})


@pytest.fixture(scope="module")
def peer() -> Iterator[RunningLLMPeer]:
    with running_llm_peer(api_key=LLM_KEY) as running:
        yield running


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory, module_spawn: Any, peer: RunningLLMPeer) -> Any:
    tenant = Tenant(
        entrypoint="lg_patterns:app", pythonpath=TENANT, bundle=_bundle,
        tool_env={"OPENAI_API_KEY": LLM_KEY, "ECHO_TOKEN": CONNECTOR_SECRET},
    )  # fmt: skip
    return RestartPlatform(
        tmp=tmp_path_factory.mktemp("lg-restart"), spawn=module_spawn, llm_base_url=peer.base_url,
        provider_url="http://127.0.0.1:9", tenant=tenant,
    ).start()  # fmt: skip


def _ledger(platform: Any) -> list[dict[str, Any]]:
    path = platform.ledger
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_run_lost_after_a_resumed_interrupt_continues_with_the_recorded_answer(platform: Any) -> None:
    item = f"crate-{uuid.uuid4().hex[:6]}"
    before = len(_ledger(platform))
    with platform.client() as client:
        started = client.post(
            "/invoke",
            json={"agent": "team-a/loop", "input": {}, "session_id": f"ship-{uuid.uuid4().hex[:8]}"},
        )
    assert started.status_code == 202, started.text
    execution_id = started.json()["execution_id"]
    held = platform.wait(execution_id, "suspended", "completed", "failed", timeout=90)
    assert held["status"] == "suspended" and held["suspension"]["payload"] == "what shall I ship?", held
    with platform.client() as client:
        answer = client.post(
            f"/api/v1/projects/{PROJECT}/executions/{execution_id}/resume",
            json={"decision": "approved", "value": item},
        )
    assert answer.status_code == 202, answer.text
    gates = platform.ledger.parent / "gates"
    deadline = time.monotonic() + 90
    while not (gates / f"at-{item}").exists():
        assert time.monotonic() < deadline, "ship never started"
        time.sleep(0.05)
    # The AER dies while `ship` (after the resumed hold) runs in the Tool Pod.
    platform.processes["aer"].stop(sig=signal.SIGKILL)
    platform.start_aer()
    (gates / f"go-{item}").touch()
    view = platform.wait(execution_id, "completed", "failed", "suspended", timeout=150)
    assert view["status"] == "completed", (view.get("error"), view.get("suspension"), view)
    assert view["restarts"] >= 1, view
    assert view["result"]["item"] == item  # the reviewer's recorded answer, not a new question
    assert item in json.dumps(view["result"]["shipped"])
    assert len(view.get("reviews") or []) == 1  # held once, decided once
    assert _ledger(platform)[before:] == [{"tool": "ship", "item": item}]  # the side effect once
    audit = platform.audit(execution_id)
    assert any(r["kind"] == "restart" for r in audit), audit
    assert [r["kind"] for r in audit].count("resume") == 1, audit
