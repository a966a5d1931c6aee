"""Replay decisions and fingerprints (Decision 4)."""

from __future__ import annotations

from agent_runtime.oe.replay import Replay, canonical_json, decide_replay, fingerprint
from agent_runtime.oe.store.base import StepRecord
from agent_runtime.protocol import CallOutcome, ToolExecuteRequest


def call(tool: str = "lookup", **args: object) -> ToolExecuteRequest:
    return ToolExecuteRequest(execution_id="e1", step=1, tool=tool, args=dict(args))


def step(fp: str, *, done: bool) -> StepRecord:
    return StepRecord(
        execution_id="e1",
        step=1,
        tool="lookup",
        fingerprint=fp,
        state="done" if done else "in_progress",
        outcome=CallOutcome(status="success", result={"x": 1}) if done else None,
        created_at=0,
        updated_at=0,
    )


def test_fingerprint_ignores_key_order_but_not_values_or_tool() -> None:
    a = ToolExecuteRequest(execution_id="e", step=1, tool="t", args={"a": 1, "b": {"c": 2, "d": 3}})
    b = ToolExecuteRequest(execution_id="e", step=9, tool="t", args={"b": {"d": 3, "c": 2}, "a": 1})
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a) != fingerprint(call("t", a=1, b={"c": 2, "d": 4}))
    assert fingerprint(a) != fingerprint(ToolExecuteRequest(execution_id="e", step=1, tool="u", args=a.args))


def test_llm_fingerprint_covers_messages_model_and_offered_tools() -> None:
    base = {"execution_id": "e", "step": 1, "tool": "invoke_llm", "llm_id": "main"}
    msgs = [{"type": "human", "content": "hi"}]
    one = ToolExecuteRequest(**base, messages=msgs)
    assert fingerprint(one) == fingerprint(ToolExecuteRequest(**base, messages=list(msgs)))
    assert fingerprint(one) != fingerprint(
        ToolExecuteRequest(**base, messages=[{"type": "human", "content": "ho"}])
    )
    assert fingerprint(one) != fingerprint(ToolExecuteRequest(**{**base, "llm_id": "other"}, messages=msgs))
    assert fingerprint(one) != fingerprint(ToolExecuteRequest(**base, messages=msgs, tools=[{"name": "t"}]))


def test_decisions() -> None:
    fp = fingerprint(call(q="x"))
    assert decide_replay(fp, None).kind is Replay.NEW
    assert decide_replay(fp, step(fp, done=True)).kind is Replay.CACHED
    assert decide_replay(fp, step(fp, done=False)).kind is Replay.IN_PROGRESS
    diverged = decide_replay(fp, step("other", done=True))
    assert diverged.kind is Replay.DIVERGED
    assert diverged.record is not None


def test_canonical_json_is_stable_for_unicode() -> None:
    assert canonical_json({"b": "é", "a": [1, 2]}) == '{"a":[1,2],"b":"\\u00e9"}'
