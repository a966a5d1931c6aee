"""The replay cache's decision for one `/tool/execute`, as a pure function (Decision 4, OE-09).

Resume re-runs the agent from the start; every step the OE already holds is answered from the cache
without executing anything, and a step whose call differs from the recorded one is never executed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agent_runtime.oe.store.base import StepRecord
from agent_runtime.protocol import ToolExecuteRequest


class Replay(StrEnum):
    NEW = "new"  # nothing recorded at this step: decide policy and execute
    CACHED = "cached"  # answer the recorded final outcome
    DIVERGED = "diverged"  # another call than the recorded one: fail the execution, run nothing
    IN_PROGRESS = "in_progress"  # the same call is being executed right now (or its result is awaited)


@dataclass(frozen=True)
class ReplayDecision:
    kind: Replay
    record: StepRecord | None = None


def canonical_json(value: Any) -> str:
    """Key-sorted, compact, ASCII-only JSON: equal values give equal text whatever the dict order."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def fingerprint(call: ToolExecuteRequest) -> str:
    """sha256 of the tool name and the canonical JSON of what it was asked (args, or the LLM request)."""
    if call.is_llm:
        asked: Any = {"llm_id": call.llm_id, "messages": call.messages, "tools": call.tools}
    else:
        asked = call.args
    text = call.tool + "\x00" + canonical_json(asked)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def decide_replay(call_fingerprint: str, existing: StepRecord | None) -> ReplayDecision:
    """What to do with a call given what the cache holds at its `(execution_id, step)`."""
    if existing is None:
        return ReplayDecision(Replay.NEW)
    if existing.fingerprint != call_fingerprint:
        return ReplayDecision(Replay.DIVERGED, existing)
    if existing.state == "done" and existing.outcome is not None:
        return ReplayDecision(Replay.CACHED, existing)
    return ReplayDecision(Replay.IN_PROGRESS, existing)
