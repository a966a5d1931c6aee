"""examples/langgraphjs-agent end to end: a LangGraph.js ReAct agent (createReactAgent, ChatOpenAI in the
TS Tool Pod, the platform checkpointer in the TS AER) through the Python OE. The sensitive `issue_refund`
is held; nothing reaches the refund provider before the approval; the approved resume replays the turn
from the execution's first checkpoint, the OE answers every earlier step from its replay cache, and the
refund runs once (the ledger provider counts each POST by its idempotency key) and the model is asked
three times in all. On SQLite (a file) and on MongoDB (FerretDB)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Process
from tests.integration.langgraph_ts.example_platform import REFUND_TOKEN, example_platform
from tests.integration.loop.harness import LLM_KEY
from tests.providers.ledger_provider import RunningLedger
from tests.providers.llm_peer import RunningLLMPeer, Turn

pytestmark = pytest.mark.integration


def _steps(platform: object, execution_id: str) -> list[tuple[int, str, str]]:
    records = [
        r
        for r in platform.audit(execution_id)  # type: ignore[attr-defined]
        if r["kind"] in ("tool", "llm") and r["decision"] != "callback_result"
    ]
    return [(int(r["step"]), str(r["tool"]), str(r["decision"])) for r in records]


@pytest.mark.parametrize("store", ["sqlite", "mongodb"])
def test_the_react_agent_holds_the_refund_and_runs_it_once_after_approval(
    store: str,
    tmp_path: Path,
    spawn: Callable[..., Process],
    llm_peer: RunningLLMPeer,
    ledger: RunningLedger,
    request: pytest.FixtureRequest,
) -> None:
    if store == "sqlite":
        sqlite_path = str(tmp_path / "cp.sqlite3")
        checkpoint_env = {"CHECKPOINT_STORE": "sqlite", "CHECKPOINT_SQLITE_PATH": sqlite_path}
    else:
        uri = request.getfixturevalue("ferretdb_uri")
        checkpoint_env = {"MONGODB_URI": uri, "MDB_AGENTIC_STORE_DB": f"lgjs_{tmp_path.name[-8:]}"}
    platform = example_platform(
        tmp_path, spawn, llm_base_url=llm_peer.base_url, refund_url=ledger.url, checkpoint_env=checkpoint_env
    )
    llm_peer.push(
        Turn.calls(("lookup_order", {"order": "B200"})),
        Turn.calls(("issue_refund", {"order": "B200", "amount": 7.5})),
        Turn.answer("Refunded 7.5 EUR for B200."),
    )
    task = {"messages": [{"role": "user", "content": "B200 never arrived, refund it"}]}
    execution_id = platform.invoke(task)
    view = platform.wait(execution_id, timeout=60)
    assert view["status"] == "suspended", view
    assert view["suspension"]["tool"] == "issue_refund"
    assert view["suspension"]["args"] == {"order": "B200", "amount": 7.5}
    assert ledger.effects("B200") == []  # nothing ran before the approval

    with platform.client() as client:
        response = client.post(
            f"/api/v1/projects/team-a/executions/{execution_id}/resume", json={"decision": "approved"}
        )
        assert response.status_code == 202, response.text
    view = platform.wait(execution_id, "completed", "failed", timeout=60)
    assert view["status"] == "completed", f"{view}\n{platform.outputs()}"
    messages = view["result"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert messages[-1]["content"] == "Refunded 7.5 EUR for B200."
    order = {"amount": 7.5, "currency": "EUR", "status": "lost in transit"}
    assert json.loads(messages[2]["content"]) == order
    assert json.loads(messages[4]["content"]) == {"refunded": "B200", "amount": 7.5}

    # Once: one POST, one key; the model was asked three times in all (the replay came from the cache).
    assert len(ledger.effects("B200")) == 1
    assert ledger.duplicates("B200") == 0
    assert len(llm_peer.requests) == 3
    assert all(r.authorization == f"Bearer {LLM_KEY}" for r in llm_peer.requests)
    # The last model call saw the whole turn, the held call's result included.
    last = llm_peer.requests[-1].body["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "tool"]

    # The audit: the first run up to the hold, then the resumed run replaying steps 1-3 from the cache,
    # the approved step 4 run, and the final model call live.
    assert _steps(platform, execution_id) == [
        (1, "invoke_llm", "allow"),
        (2, "lookup_order", "allow"),
        (3, "invoke_llm", "allow"),
        (4, "issue_refund", "approval"),
        (1, "invoke_llm", "cached"),
        (2, "lookup_order", "cached"),
        (3, "invoke_llm", "cached"),
        (4, "issue_refund", "approved"),
        (5, "invoke_llm", "allow"),
    ]
    # The model key never reached the AER, the refund credential never left the Tool Pod.
    aer_output = platform.processes["aer"].output()
    assert LLM_KEY not in aer_output and REFUND_TOKEN not in aer_output
    assert REFUND_TOKEN not in json.dumps(view)


def test_a_second_turn_of_the_session_holds_and_resumes_on_top_of_the_first(
    tmp_path: Path,
    spawn: Callable[..., Process],
    llm_peer: RunningLLMPeer,
    ledger: RunningLedger,
) -> None:
    checkpoint_env = {"CHECKPOINT_STORE": "sqlite", "CHECKPOINT_SQLITE_PATH": str(tmp_path / "cp.sqlite3")}
    platform = example_platform(
        tmp_path, spawn, llm_base_url=llm_peer.base_url, refund_url=ledger.url, checkpoint_env=checkpoint_env
    )

    def turn(text: str) -> str:
        with platform.client() as client:
            body = {
                "agent": "team-a/loop",
                "session_id": "customer-9",
                "input": {"messages": [{"role": "user", "content": text}]},
            }
            response = client.post("/invoke", json=body)
        assert response.status_code == 202, response.text
        return str(response.json()["execution_id"])

    llm_peer.push(Turn.calls(("lookup_order", {"order": "A100"})), Turn.answer("A100 was delivered."))
    first = platform.wait(turn("where is A100?"), timeout=60)
    assert first["status"] == "completed", first

    llm_peer.push(
        Turn.calls(("issue_refund", {"order": "A100", "amount": 42})),
        Turn.answer("Refunded A100."),
    )
    second = turn("refund it anyway")
    assert platform.wait(second, timeout=60)["status"] == "suspended"
    with platform.client() as client:
        response = client.post(
            f"/api/v1/projects/team-a/executions/{second}/resume", json={"decision": "approved"}
        )
        assert response.status_code == 202, response.text
    view = platform.wait(second, "completed", "failed", timeout=60)
    assert view["status"] == "completed", f"{view}\n{platform.outputs()}"
    # The resumed second turn replayed from its own start, on top of the first turn's state.
    types = [m["type"] for m in view["result"]["messages"]]
    assert types == ["human", "ai", "tool", "ai", "human", "ai", "tool", "ai"], types
    assert len(ledger.effects("A100")) == 1
    assert len(llm_peer.requests) == 4  # two per turn; the resume's replay asked the model nothing new
    last = llm_peer.requests[-1].body["messages"]
    assert [m["role"] for m in last] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
