"""A LangGraph ReAct agent run by the AER's runner against an OE double that replays like the OE."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agent_runtime.protocol import AERExecuteRequest, CallbackStatus, ExecutorCallback
from agent_runtime.servers.executions import run_execution
from tests.unit.langgraph.graphs import ALL_TOOLS, react_app
from tests.unit.langgraph.oe_replay import ReplayingOE
from tests.unit.runtime.oe_double import ai, suspended


def _run(
    app: Any, oe: ReplayingOE, *, execution_id: str = "ex-1", resume: bool = False, **fields: Any
) -> ExecutorCallback:
    request = AERExecuteRequest(
        execution_id=execution_id,
        session_id=fields.pop("session_id", "sess-1"),
        workspace_id=fields.pop("workspace_id", "ws"),
        input=fields.pop("input", {"messages": [{"type": "human", "content": "count: a b c"}]}),
        resume=resume,
    )
    return asyncio.run(run_execution(app, request, oe=oe, tools=list(ALL_TOOLS)))


def test_a_turn_runs_model_and_tools_through_the_oe_in_step_order() -> None:
    oe = ReplayingOE(
        local_tools=["word_count"],
        model_answers=[
            ai(tool_calls=[("c1", "word_count", {"text": "a b c"}), ("c2", "lookup", {"word": "a"})]),
            ai("3 words"),
        ],
    )
    callback = _run(react_app(), oe)
    assert callback.status is CallbackStatus.COMPLETED, callback
    assert oe.steps == [(1, "invoke_llm"), (2, "word_count"), (3, "lookup"), (4, "invoke_llm")]
    messages = callback.result["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "tool", "ai"]
    assert json.loads(messages[2]["content"]) == {"words": 3}
    assert messages[-1]["content"] == "3 words"
    # The last model call saw both tool results, in the model's order.
    last = oe.llm_messages[-1]
    assert [m["type"] for m in last] == ["human", "ai", "tool", "tool"]


def test_a_sensitive_call_interrupts_the_graph_and_the_resume_replays_with_the_same_steps() -> None:
    oe = ReplayingOE(
        sensitive=["publish"],
        model_answers=[
            ai(tool_calls=[("c1", "lookup", {"word": "a"})]),
            ai(tool_calls=[("c2", "lookup", {"word": "b"}), ("c3", "publish", {"text": "hi"})]),
            ai("published"),
        ],
    )
    app = react_app()
    first = _run(app, oe)
    assert first.status is CallbackStatus.SUSPENDED, first
    assert first.metadata["step"] == 5 and first.metadata["tool"] == "publish"
    assert oe.steps == [(1, "invoke_llm"), (2, "lookup"), (3, "invoke_llm"), (4, "lookup"), (5, "publish")]
    oe.approve(5)
    oe.requests.clear()
    second = _run(app, oe, resume=True)
    assert second.status is CallbackStatus.COMPLETED, second
    # Only the interrupted tools task ran again: its calls kept their numbers (4 from the cache, 5 approved).
    assert oe.steps == [(4, "lookup"), (5, "publish"), (6, "invoke_llm")]
    assert [step for step, _ in oe.executed] == [1, 2, 3, 4, 5, 6]  # nothing ran twice
    assert second.result["messages"][-1]["content"] == "published"
    assert [m["type"] for m in second.result["messages"]].count("human") == 1


def test_a_resume_that_suspends_again_keeps_numbering() -> None:
    oe = ReplayingOE(
        sensitive=["publish"],
        model_answers=[
            ai(tool_calls=[("c1", "publish", {"text": "one"})]),
            ai(tool_calls=[("c2", "publish", {"text": "two"})]),
            ai("done"),
        ],
    )
    app = react_app()
    assert _run(app, oe).metadata["step"] == 2
    oe.approve(2)
    again = _run(app, oe, resume=True)
    assert again.status is CallbackStatus.SUSPENDED and again.metadata["step"] == 4
    oe.approve(4)
    oe.requests.clear()
    last = _run(app, oe, resume=True)
    assert last.status is CallbackStatus.COMPLETED, last
    assert oe.steps == [(4, "publish"), (5, "invoke_llm")]


def test_a_tools_own_failure_and_a_denial_reach_the_model_and_the_turn_goes_on() -> None:
    oe = ReplayingOE(
        failing={"lookup": "upstream said 500"},
        model_answers=[ai(tool_calls=[("c1", "lookup", {"word": "a"})]), ai("sorry")],
    )
    callback = _run(react_app(), oe)
    assert callback.status is CallbackStatus.COMPLETED, callback
    tool_message = callback.result["messages"][2]
    assert tool_message["status"] == "error"
    assert tool_message["content"] == "error (tool_error): upstream said 500"
    assert oe.llm_messages[-1][-1]["content"] == "error (tool_error): upstream said 500"


def _platform_failure_turn(saver: str) -> tuple[ReplayingOE, ExecutorCallback, ExecutorCallback]:
    """Turn 1 loses the OE's answer to a tool call; turn 2 runs on the same thread."""
    from langgraph.checkpoint.memory import InMemorySaver

    plain = InMemorySaver()
    app = react_app(saver=(lambda app: app.checkpointer()) if saver == "platform" else (lambda app: plain))
    oe = ReplayingOE(
        model_answers=[ai(tool_calls=[("c1", "lookup", {"word": "a"})]), ai("hello again")],
    )
    oe.lose.add("lookup")
    first = _run(app, oe, execution_id="ex-1")
    second = _run(app, oe, execution_id="ex-2", input={"messages": [{"type": "human", "content": "hi"}]})
    return oe, first, second


def test_a_platform_failure_ends_the_turn_and_the_platform_checkpointer_keeps_nothing_of_it() -> None:
    oe, first, second = _platform_failure_turn("platform")
    assert first.status is CallbackStatus.FAILED, first
    assert first.error is not None and first.error.category == "platform_failure"
    # The model was never asked again in turn 1 (the next model call was refused).
    assert oe.steps[:2] == [(1, "invoke_llm"), (2, "lookup")]
    assert [tool for _, tool in oe.steps].count("invoke_llm") == 2  # turn 1's first, turn 2's only
    assert second.status is CallbackStatus.COMPLETED, second
    seen = json.dumps(oe.llm_messages[-1])
    assert "platform failure" not in seen and "did not answer" not in seen


def test_with_a_plain_saver_the_turn_fails_too_but_the_saver_keeps_the_failing_step() -> None:
    oe, first, _ = _platform_failure_turn("plain")
    assert first.status is CallbackStatus.FAILED, first
    assert first.error is not None and first.error.category == "platform_failure"
    # Documented difference (LG-09): the plain saver kept the tool step, so turn 2's model sees it.
    assert "did not answer POST /tool/execute" in json.dumps(oe.llm_messages[-1])


@pytest.mark.parametrize("saver", ["platform", "plain"])
def test_a_platform_failure_in_the_last_step_fails_the_turn(saver: str) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    plain = InMemorySaver()
    app = react_app(
        loop_back=False,
        saver=(lambda app: app.checkpointer()) if saver == "platform" else (lambda app: plain),
    )
    oe = ReplayingOE(model_answers=[ai(tool_calls=[("c1", "lookup", {"word": "a"})])])
    oe.lose.add("lookup")
    callback = _run(app, oe)
    assert callback.status is CallbackStatus.FAILED, callback
    assert callback.error is not None and callback.error.category == "platform_failure"


def test_a_model_call_held_for_approval_interrupts_the_agent_node_and_resumes_it() -> None:
    oe = ReplayingOE(
        model_answers=[ai(tool_calls=[("c1", "lookup", {"word": "a"})]), ai("approved answer")],
    )
    original = oe._answer

    def hold_second_model_call(request: Any) -> Any:
        if request.tool == "invoke_llm" and request.step == 3 and 3 not in oe.approved:
            return suspended(3, {"kind": "approval_required", "tool": "invoke_llm", "args": {}, "step": 3})
        return original(request)

    oe.policy = hold_second_model_call
    app = react_app()
    first = _run(app, oe)
    assert first.status is CallbackStatus.SUSPENDED and first.metadata["tool"] == "invoke_llm"
    oe.approve(3)
    oe.requests.clear()
    second = _run(app, oe, resume=True)
    assert second.status is CallbackStatus.COMPLETED, second
    assert oe.steps == [(3, "invoke_llm")]
    assert second.result["messages"][-1]["content"] == "approved answer"
