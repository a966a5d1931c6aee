"""The durable execution log (B-17, LG-16) of a LangGraph turn with an approval, in JSONL and in MongoDB
(FerretDB): the OE's `GET /execution/{id}/logs` lists the lifecycle, every step and every graph node in order.
The same turn's spans go to the JSONL and MongoDB span exporters (B-18): a file per process, one collection.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pymongo
import pytest

from tests.conftest import REPO_ROOT, Process, free_port, wait_for_port
from tests.integration.cli.driver import ok_json, run
from tests.integration.loop.harness import CLIENT_TOKEN, PLANTED, Tenant
from tests.integration.observability.harness import ObservedPlatform
from tests.providers.llm_peer import RunningLLMPeer, Turn

pytestmark = pytest.mark.integration

EXAMPLE = REPO_ROOT / "examples" / "langgraph-agent"
PROVIDER_TOKEN = "example-notes-token-log-77e"
TEXT = "remember the brave new world"


def _example_bundle(directory: Path, provider_url: str) -> Path:
    from agent_runtime.connectors import (
        build_bundle,
        load_tool_defs,
        load_tool_yaml,
        materialize_connector,
        write_bundle,
    )

    tool = load_tool_yaml(EXAMPLE / "connectors" / "notes" / "tool.yaml")
    tool = tool.model_copy(update={"source": tool.source.model_copy(update={"base_url": provider_url})})
    catalog = load_tool_defs(EXAMPLE / "connectors" / "notes" / "tool_defs.yaml")
    return write_bundle(build_bundle([materialize_connector(tool, catalog)]), directory)


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


def test_a_langgraph_turn_logs_its_nodes_steps_and_lifecycle_in_order_in_jsonl_and_mongodb(
    tmp_path: Path,
    spawn: Callable[..., Process],
    llm_peer: RunningLLMPeer,
    notes_provider: str,
    ferretdb_uri: str,
) -> None:
    log_dir = tmp_path / "executions"
    collection = f"execution_logs_{tmp_path.name[-8:]}"
    trace_dir, traces = tmp_path / "traces", f"traces_{tmp_path.name[-8:]}"
    platform = ObservedPlatform(
        tmp=tmp_path,
        spawn=spawn,
        llm_base_url=llm_peer.base_url,
        provider_url=notes_provider,
        tenant=Tenant(
            entrypoint="langgraph_agent.agent:app",
            pythonpath=EXAMPLE,
            bundle=_example_bundle,
            tool_env={"NOTES_TOKEN": PROVIDER_TOKEN},
        ),
        checkpoint_env={"CHECKPOINT_STORE": "sqlite", "CHECKPOINT_SQLITE_PATH": str(tmp_path / "cp.sqlite3")},
        observe={
            "AGENTIC_EXECUTION_LOG": "jsonl,mongodb",
            "AGENTIC_EXECUTION_LOG_DIR": str(log_dir),
            "AGENTIC_EXECUTION_LOG_MONGODB_URI": ferretdb_uri,
            "AGENTIC_EXECUTION_LOG_COLLECTION": collection,
            "AGENTIC_TRACING_EXPORTER": "jsonl,mongodb",
            "AGENTIC_TRACING_JSONL_DIR": str(trace_dir),
            "AGENTIC_TRACING_MONGODB_URI": ferretdb_uri,
            "AGENTIC_TRACING_MONGODB_COLLECTION": traces,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        },
    ).start()
    llm_peer.push(
        Turn.calls(("word_count", {"text": TEXT}), ("notes_listNotes", {})),
        Turn.calls(("notes_createNote", {"text": "5 words: " + TEXT})),
        Turn.answer("Saved your note."),
    )
    execution_id = platform.invoke({"messages": [{"role": "user", "content": f"count and save: {TEXT}"}]})
    assert platform.wait(execution_id)["status"] == "suspended"
    with platform.client() as client:
        response = client.post(
            f"/api/v1/projects/team-a/executions/{execution_id}/resume", json={"decision": "approved"}
        )
        assert response.status_code == 202, response.text
    assert platform.wait(execution_id, "completed", "failed")["status"] == "completed"

    logs = platform.logs(execution_id)
    assert logs["enabled"] is True
    records = logs["records"]
    assert all(record["execution_id"] == execution_id for record in records)
    nodes = [(r["event"], r["node"], r["status"]) for r in records if r["kind"] == "node"]
    # The ReAct graph: the model node, the tools node (two calls), the model, the tools node that pauses
    # for the approval; the resume re-enters the tools node, then the model answers.
    assert nodes == [
        ("node_start", "agent", None),
        ("node_end", "agent", "ok"),
        ("node_start", "tools", None),
        ("node_end", "tools", "ok"),
        ("node_start", "agent", None),
        ("node_end", "agent", "ok"),
        ("node_start", "tools", None),
        ("node_end", "tools", "interrupted"),
        ("node_start", "tools", None),
        ("node_end", "tools", "ok"),
        ("node_start", "agent", None),
        ("node_end", "agent", "ok"),
    ], nodes
    lifecycle = [r["event"] for r in records if r["kind"] == "lifecycle"]
    assert lifecycle == ["created", "running", "suspended", "resumed", "completed"], lifecycle
    finished = [(r["step"], r["tool"]) for r in records if r["event"] == "step_finished"]
    assert sorted(finished) == sorted(
        [
            (1, "invoke_llm"),
            (2, "word_count"),
            (3, "notes_listNotes"),
            (4, "invoke_llm"),
            (5, "notes_createNote"),
            (5, "notes_createNote"),
            (6, "invoke_llm"),
        ]
    ), finished
    assert {r["component"] for r in records} == {"oe", "aer"}

    # The same records in each sink: a JSONL file per process, and one MongoDB collection.
    files = sorted(path.name for path in log_dir.iterdir())
    assert files == [f"{execution_id}.aer.jsonl", f"{execution_id}.oe.jsonl"]
    from_files = [json.loads(line) for name in files for line in (log_dir / name).read_text().splitlines()]
    with pymongo.MongoClient(ferretdb_uri) as mongo:
        database = mongo.get_default_database(default="agent_engine")
        from_mongo = list(database[collection].find({"execution_id": execution_id}, {"_id": 0}))
    assert len(from_files) == len(from_mongo) == len(records)
    mongo_nodes = sorted((d["at"], d["event"], d["node"]) for d in from_mongo if d["kind"] == "node")
    assert [(event, node) for _, event, node in mongo_nodes] == [(e, n) for e, n, _ in nodes]

    # Nothing secret in any of it.
    text = json.dumps(records) + "".join(path.read_text() for path in log_dir.iterdir())
    for secret in (*PLANTED, PROVIDER_TOKEN):
        assert secret not in text

    # The CLI reads the same log: JSON as the OE answers it, a table naming each node and step.
    assert ok_json(platform, "logs", execution_id)["records"] == records
    table = run(platform, "logs", execution_id)
    assert table.returncode == 0, table.stderr
    assert "node_start" in table.stdout and "agent" in table.stdout and "notes_createNote" in table.stdout
    missing = run(platform, "logs", "0" * 32)
    assert missing.returncode == 3 and "Traceback" not in missing.stderr

    # Each log record names its trace; the span exporters hold that trace: a JSONL file per process and the
    # MongoDB collection, the same spans in both, the execution's among them, no secret in any.
    # (`resumed` is written under the reviewer's request, another trace the resumed run links to.)
    (trace_id,) = {r["trace_id"] for r in records if r["event"] != "resumed"}
    assert trace_id and len(trace_id) == 32
    with pymongo.MongoClient(ferretdb_uri) as mongo:
        stored = mongo.get_default_database(default="agent_engine")[traces]
        deadline = time.monotonic() + 20
        while True:
            in_files = [
                span
                for path in sorted(trace_dir.iterdir())
                for span in map(json.loads, path.read_text().splitlines())
                if span["context"]["trace_id"] == f"0x{trace_id}"
            ]
            in_mongo = list(stored.find({"context.trace_id": f"0x{trace_id}"}, {"_id": 0}))
            names = {span["name"] for span in in_files}
            if {"run 1", "run 2 (resume)", "aer POST /execute"} <= names and len(in_mongo) == len(in_files):
                break
            assert time.monotonic() < deadline, (sorted(names), len(in_mongo))
            time.sleep(0.2)
    assert sorted(p.name.split("-")[0] for p in trace_dir.iterdir()) == ["aer", "oe", "tool"]
    assert {s["context"]["span_id"] for s in in_files} == {s["context"]["span_id"] for s in in_mongo}
    assert "execution team-a/loop" in names and any(name.startswith("chat ") for name in names), names
    spans_text = json.dumps(in_files) + json.dumps(in_mongo)
    for secret in (*PLANTED, PROVIDER_TOKEN):
        assert secret not in spans_text

    # Reading the log is reading the execution: another caller's token gets nothing.
    with platform.client(token=CLIENT_TOKEN + "-wrong") as client:
        assert client.get(f"/execution/{execution_id}/logs").status_code == 401
