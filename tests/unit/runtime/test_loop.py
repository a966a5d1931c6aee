"""The framework-less tool loop: model, tools, tool messages, until a final answer (B-05, LG-08)."""

import asyncio
from typing import Any

import pytest

from agent_runtime.protocol import ToolExecuteAnswer, ToolExecuteRequest
from agent_runtime.sdk import (
    App,
    PlatformFailure,
    RequestContext,
    SecureWrappedLLM,
    ToolLoopExhaustedError,
    tool_loop,
)
from agent_runtime.sdk.context import entrypoint_scope, run_scope
from agent_runtime.sdk.errors import SuspendRequested
from tests.unit.runtime.oe_double import ScriptedOE, ai, denied, failed, final, routed_back, suspended

TOOLS = [
    {"name": "add", "description": "Add.", "inputSchema": {"type": "object"}},
    {"name": "lookup", "description": "Look up.", "inputSchema": {"type": "object"}},
]


def _app() -> App:
    app = App()

    @app.tool(is_local=True)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    return app


def _loop(oe: ScriptedOE, app: App, *, max_turns: int = 8) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        local = {name: spec for name, spec in app.tools.items() if spec.is_local}
        with run_scope(RequestContext(execution_id="ex"), oe=oe, local_tools=local), entrypoint_scope():
            llm = SecureWrappedLLM(object(), llm_id="default")
            return await tool_loop(
                llm, [{"type": "human", "content": "go"}], tools=TOOLS, max_turns=max_turns
            )

    return asyncio.run(main())


def test_runs_the_tools_the_model_asks_for_until_it_answers() -> None:
    answers = [
        ai(tool_calls=[("c1", "add", {"a": 1, "b": 2}), ("c2", "lookup", {"key": "k"})]),
        ai("the sum is 3"),
    ]
    oe = ScriptedOE(local_tools={"add"}, model_answers=answers)
    final_message = _loop(oe, _app())
    assert final_message["content"] == "the sum is 3"
    # Steps in program order: the model, then its tool calls in the order it listed them, then the model.
    assert oe.steps == [(1, "invoke_llm"), (2, "add"), (3, "lookup"), (4, "invoke_llm")]
    assert [(r.step, r.status, r.result) for r in oe.results] == [(2, "success", 3)]
    second = oe.requests[3]
    assert second.tools == TOOLS
    assert second.messages is not None
    assert [m["type"] for m in second.messages] == ["human", "ai", "tool", "tool"]
    add_message, lookup_message = second.messages[2:]
    assert (add_message["tool_call_id"], add_message["name"], add_message["content"]) == ("c1", "add", "3")
    assert lookup_message["content"] == '{"tool": "lookup", "args": {"key": "k"}}'


def test_tool_errors_and_denials_become_tool_messages_the_model_reads() -> None:
    answers = [ai(tool_calls=[("c1", "broken", {}), ("c2", "forbidden", {})]), ai("sorry")]

    def policy(request: ToolExecuteRequest) -> ToolExecuteAnswer:
        if request.tool == "invoke_llm":
            return final(request.step, answers.pop(0))
        if request.tool == "broken":
            return failed(request.step, "tool_pod_unreachable", "the Tool Pod did not answer")
        return denied(request.step, "forbidden by the Agent's tool policy")

    oe = ScriptedOE(policy=policy)
    assert _loop(oe, _app())["content"] == "sorry"
    messages = oe.requests[-1].messages or []
    assert [(m["content"], m["status"]) for m in messages[2:]] == [
        ("error (tool_pod_unreachable): the Tool Pod did not answer", "error"),
        ("denied by policy: forbidden by the Agent's tool policy", "error"),
    ]


@pytest.mark.parametrize(
    ("answer", "raised"),
    [
        (lambda step: routed_back(step), PlatformFailure),  # "add" reported to an OE that refuses
        (lambda step: suspended(step, {"reason": "approve", "payload": None}), SuspendRequested),
    ],
)
def test_platform_failures_and_suspensions_end_the_turn(answer: Any, raised: type[BaseException]) -> None:
    def policy(request: ToolExecuteRequest) -> ToolExecuteAnswer:
        if request.tool == "invoke_llm":
            return final(request.step, ai(tool_calls=[("c1", "add", {"a": 1, "b": 1}), ("c2", "ok", {})]))
        if request.tool == "ok":
            return final(request.step, "fine")
        return answer(request.step)  # type: ignore[no-any-return]

    oe = ScriptedOE(policy=policy, acknowledge_results=False)
    with pytest.raises(raised):
        _loop(oe, _app())
    assert [tool for _, tool in oe.steps].count("invoke_llm") == 1  # the model never saw the failure


def test_gives_up_after_max_turns() -> None:
    oe = ScriptedOE(policy=lambda r: final(r.step, ai(tool_calls=[("c", "lookup", {})]) if r.is_llm else "x"))
    with pytest.raises(ToolLoopExhaustedError, match="after 2 answers"):
        _loop(oe, _app(), max_turns=2)
