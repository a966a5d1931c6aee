"""examples/langgraph-agent end to end through the real OE, AER and Tool Pod, with the LLM peer.

A LangGraph ReAct agent with a LangChain ChatOpenAI model (it runs in the Tool Pod), a local tool and the
example's `notes` connector: the tools run, the sensitive `notes_createNote` waits for approval, and the
approved resume continues from the checkpoint (SQLite, or MongoDB on FerretDB) without running anything
twice: the model is asked three times in all and the provider stores one note.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from agent_runtime.connectors import (
    build_bundle,
    load_tool_defs,
    load_tool_yaml,
    materialize_connector,
    write_bundle,
)
from tests.conftest import REPO_ROOT, Process, free_port, wait_for_port
from tests.integration.loop.harness import LLM_KEY, Platform, Tenant
from tests.providers.llm_peer import RunningLLMPeer, Turn

EXAMPLE = REPO_ROOT / "examples" / "langgraph-agent"
PROVIDER_TOKEN = "example-notes-token-e2e-5d2"
TEXT = "remember the brave new world"


def _example_bundle(directory: Path, provider_url: str) -> Path:
    """The example's own connector files, bound to where this test's provider listens."""
    tool = load_tool_yaml(EXAMPLE / "connectors" / "notes" / "tool.yaml")
    tool = tool.model_copy(update={"source": tool.source.model_copy(update={"base_url": provider_url})})
    catalog = load_tool_defs(EXAMPLE / "connectors" / "notes" / "tool_defs.yaml")
    return write_bundle(build_bundle([materialize_connector(tool, catalog)]), directory)


@dataclass
class CheckpointedPlatform(Platform):
    """The loop harness's platform with the AER's checkpoint store set (the operator renders these)."""

    checkpoint_env: dict[str, str] | None = None

    def _runtime_env(self, mode: str, port: int) -> dict[str, str]:
        env = super()._runtime_env(mode, port)
        if mode == "aer":
            env.update(self.checkpoint_env or {})
        return env


@pytest.fixture
def notes_provider(spawn: Callable[..., Process]) -> Iterator[str]:
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(EXAMPLE),
        "NOTES_PROVIDER_TOKEN": PROVIDER_TOKEN,
    }
    proc = spawn(
        [sys.executable, "-m", "langgraph_agent.provider", "--port", str(port)], env=env, name="notes"
    )
    wait_for_port("127.0.0.1", port, proc=proc.popen)
    yield f"http://127.0.0.1:{port}"


def _notes(provider: str) -> list[dict[str, object]]:
    response = httpx.get(f"{provider}/notes", headers={"authorization": f"Bearer {PROVIDER_TOKEN}"})
    return list(response.json()["notes"])


def _platform(
    tmp_path: Path,
    spawn: Callable[..., Process],
    llm_peer: RunningLLMPeer,
    provider: str,
    env: dict[str, str],
) -> CheckpointedPlatform:
    tenant = Tenant(
        entrypoint="langgraph_agent.agent:app",
        pythonpath=EXAMPLE,
        bundle=_example_bundle,
        tool_env={"NOTES_TOKEN": PROVIDER_TOKEN},
    )
    return CheckpointedPlatform(
        tmp=tmp_path,
        spawn=spawn,
        llm_base_url=llm_peer.base_url,
        provider_url=provider,
        tenant=tenant,
        checkpoint_env=env,
    ).start()


@pytest.mark.parametrize("store", ["sqlite", "mongodb"])
def test_the_langgraph_agent_runs_tools_waits_for_approval_and_resumes_without_duplicates(
    store: str,
    tmp_path: Path,
    spawn: Callable[..., Process],
    llm_peer: RunningLLMPeer,
    notes_provider: str,
    request: pytest.FixtureRequest,
) -> None:
    if store == "sqlite":
        checkpoint_env = {
            "CHECKPOINT_STORE": "sqlite",
            "CHECKPOINT_SQLITE_PATH": str(tmp_path / "cp.sqlite3"),
        }
    else:
        uri = request.getfixturevalue("ferretdb_uri")
        checkpoint_env = {"MONGODB_URI": uri, "MDB_AGENTIC_STORE_DB": f"e2e_{tmp_path.name[-8:]}"}
    platform = _platform(
        tmp_path, spawn=spawn, llm_peer=llm_peer, provider=notes_provider, env=checkpoint_env
    )
    llm_peer.push(
        Turn.calls(("word_count", {"text": TEXT}), ("notes_listNotes", {})),
        Turn.calls(("notes_createNote", {"text": "5 words: " + TEXT})),
        Turn.answer("Saved your note."),
    )
    execution_id = platform.invoke({"messages": [{"role": "user", "content": f"count and save: {TEXT}"}]})
    view = platform.wait(execution_id)
    assert view["status"] == "suspended", view
    assert view["suspension"]["tool"] == "notes_createNote"
    assert view["suspension"]["args"] == {"text": "5 words: " + TEXT}
    assert _notes(notes_provider) == []  # nothing ran before the approval

    with platform.client() as client:
        response = client.post(
            f"/api/v1/projects/team-a/executions/{execution_id}/resume", json={"decision": "approved"}
        )
        assert response.status_code == 202, response.text
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    messages = view["result"]["messages"]
    assert messages[-1]["type"] == "ai" and messages[-1]["content"] == "Saved your note."
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "tool", "ai", "tool", "ai"]
    assert json.loads(messages[2]["content"]) == {"words": 5, "characters": len(TEXT)}

    # Resumed from the checkpoint: the model was asked three times in all, the note was stored once.
    assert len(llm_peer.requests) == 3
    assert _notes(notes_provider) == [{"id": 1, "text": "5 words: " + TEXT}]
    last = llm_peer.requests[-1].body["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool"]
    # And it resumed from the LangGraph checkpoint, not from the start: after the resume only the held call
    # (step 5, approved) and the next model call (step 6) reached the OE; nothing was answered from cache.
    audit = platform.audit(execution_id)
    resumed_at = next(i for i, record in enumerate(audit) if record["kind"] == "resume")
    calls = [(r["kind"], r["step"], r["tool"]) for r in audit if r["kind"] in ("tool", "llm")]
    # Steps 2 and 3 run at once (one model answer, two tool calls): their records come in finishing order.
    assert sorted(calls[:5], key=lambda call: call[1]) == [
        ("llm", 1, "invoke_llm"),
        ("tool", 2, "word_count"),
        ("tool", 2, "word_count"),  # the local body's reported result
        ("tool", 3, "notes_listNotes"),
        ("llm", 4, "invoke_llm"),
    ]
    after = [(r["kind"], r["step"]) for r in audit[resumed_at + 1 :] if r["kind"] in ("tool", "llm")]
    assert after == [("tool", 5), ("llm", 6)], after
    assert all(record["decision"] != "cached" for record in audit)
    outputs = platform.outputs()
    assert PROVIDER_TOKEN not in outputs and "sk-loop-llm-key" not in outputs


def test_a_model_failure_in_the_tool_pod_fails_the_turn_without_leaking_the_key(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, notes_provider: str
) -> None:
    """The peer answers 401 quoting the key it was sent, as careless providers do."""
    env = {"CHECKPOINT_STORE": "sqlite", "CHECKPOINT_SQLITE_PATH": str(tmp_path / "cp.sqlite3")}
    platform = _platform(tmp_path, spawn=spawn, llm_peer=llm_peer, provider=notes_provider, env=env)
    llm_peer.push(Turn.error(401))
    execution_id = platform.invoke({"messages": [{"role": "user", "content": "hello"}]})
    view = platform.wait(execution_id)
    assert view["status"] == "failed", view
    shown = json.dumps(view)
    assert "AuthenticationError" in shown and LLM_KEY not in shown
    assert LLM_KEY in llm_peer.requests[0].authorization  # the key did reach the model API
    assert LLM_KEY not in platform.outputs() and LLM_KEY not in json.dumps(platform.audit(execution_id))
