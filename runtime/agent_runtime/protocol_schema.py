"""The wire contracts of `protocol.py` as one JSON Schema document: the source the TypeScript runner's types
are generated from (`runtime-ts/packages/runner/schema/protocol.schema.json`), so both runtimes read and
write the same bodies.

`python -m agent_runtime.protocol_schema` writes the file; `--check` exits 1 when the checked-in file differs
(the unit test does the same). Each model is emitted in the mode its receiver sees it: request bodies as
validated (defaults optional), answers as serialized (every field present).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from agent_runtime import protocol
from agent_runtime.execution_token import Claims

# (model, mode): `validation` for what the TS runner receives or sends as a request, `serialization` for
# what it answers. Requests the runner sends (ToolExecuteRequest, ...) are validation too: optional
# fields may be left out, as the Python sender does with exclude_none.
MODELS: tuple[tuple[type[BaseModel], Literal["validation", "serialization"]], ...] = (
    (protocol.AERExecuteRequest, "validation"),
    (protocol.AERExecutionStatus, "serialization"),
    (protocol.SuspendReply, "validation"),
    (protocol.ToolExecuteRequest, "validation"),
    (protocol.ToolExecuteAnswer, "validation"),
    (protocol.ToolResultRequest, "validation"),
    (protocol.ExecutorCallback, "validation"),
    (protocol.GraphStreamChunk, "validation"),
    (protocol.ToolPodExecuteRequest, "validation"),
    (protocol.InvokeLLMRequest, "validation"),
    (protocol.CallOutcome, "serialization"),
    (protocol.CallError, "validation"),
    (protocol.LLMDelta, "validation"),
    (protocol.DrainRequest, "validation"),
    (protocol.DrainAnswer, "serialization"),
    (protocol.InterruptCallRequest, "validation"),
    (protocol.InterruptCallAnswer, "serialization"),
    (Claims, "validation"),
)

RUNNER_DIR = Path(__file__).resolve().parents[2] / "runtime-ts" / "packages" / "runner"
SCHEMA_PATH = RUNNER_DIR / "schema" / "protocol.schema.json"


def protocol_schema() -> dict[str, Any]:
    """One document: every model under `$defs`, plus the contract's constants (pure)."""
    _, document = models_json_schema(
        list(MODELS), ref_template="#/$defs/{model}", title="Agent Engine runtime wire contracts"
    )
    document["description"] = (
        "Generated from agent_runtime/protocol.py by agent_runtime.protocol_schema; do not edit by hand."
    )
    document["x-constants"] = {
        "INVOKE_LLM": protocol.INVOKE_LLM,
        "AGENT_SUSPEND": protocol.AGENT_SUSPEND,
        "MAX_STEP": protocol.MAX_STEP,
        "MAX_EPOCH_MS": protocol.MAX_EPOCH_MS,
        "EXECUTION_NOT_FOUND": protocol.EXECUTION_NOT_FOUND,
        "INTERRUPTED": protocol.INTERRUPTED,
        "EXECUTION_DRAINED": protocol.EXECUTION_DRAINED,
        "EXECUTION_DRAINING": protocol.EXECUTION_DRAINING,
        "PLATFORM_FAILURE": protocol.PLATFORM_FAILURE,
        "ENTRYPOINT_ERROR": protocol.ENTRYPOINT_ERROR,
        "INVALID_RESULT": protocol.INVALID_RESULT,
        "POLICY_DENIED": protocol.POLICY_DENIED,
        "REPLAY_DIVERGED": protocol.REPLAY_DIVERGED,
        "LLM_ERROR": protocol.LLM_ERROR,
        "UNKNOWN_LLM": protocol.UNKNOWN_LLM,
    }
    return document


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the checked-in schema differs")
    args = parser.parse_args(argv)
    text = render(protocol_schema())
    if args.check:
        current = SCHEMA_PATH.read_text() if SCHEMA_PATH.exists() else ""
        if current != text:
            print(
                f"{SCHEMA_PATH} is out of date with agent_runtime/protocol.py; run "
                "`python -m agent_runtime.protocol_schema` and `npm run generate` in runtime-ts",
                file=sys.stderr,
            )
            return 1
        return 0
    SCHEMA_PATH.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
