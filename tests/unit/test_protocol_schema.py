"""The JSON Schema the TypeScript runner's types are generated from is exactly what protocol.py says now.

A model changed without `python -m agent_runtime.protocol_schema` fails here (and the TS side's own test
fails when the generated types lag the schema), so the two runtimes cannot drift apart silently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_runtime import protocol
from agent_runtime.protocol_schema import SCHEMA_PATH, main, protocol_schema, render


def test_checked_in_schema_matches_protocol_py() -> None:
    assert SCHEMA_PATH.read_text() == render(protocol_schema()), (
        "runtime-ts/packages/runner/schema/protocol.schema.json is stale: run "
        "`python -m agent_runtime.protocol_schema`, then `npm run generate` in runtime-ts"
    )
    assert main(["--check"]) == 0


def test_every_wire_model_the_runner_speaks_is_in_it() -> None:
    defs = protocol_schema()["$defs"]
    wanted = {"AERExecuteRequest", "ToolExecuteRequest", "ToolExecuteAnswer", "CallOutcome", "DrainRequest"}
    assert wanted <= set(defs)
    # Field constraints travel with the schema: the TS runner refuses what pydantic refuses.
    drain = defs["DrainRequest"]
    assert set(drain["required"]) == {"request_id", "execution_id", "deadline_at_ms"}
    assert drain["properties"]["deadline_at_ms"]["maximum"] == protocol.MAX_EPOCH_MS
    assert defs["InterruptCallRequest"]["properties"]["step_number"]["maximum"] == protocol.MAX_STEP


def test_a_changed_model_is_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = json.loads(render(protocol_schema()))
    del stale["$defs"]["DrainRequest"]["properties"]["reason"]
    path = tmp_path / "protocol.schema.json"
    path.write_text(json.dumps(stale))
    monkeypatch.setattr("agent_runtime.protocol_schema.SCHEMA_PATH", path)
    assert main(["--check"]) == 1
