"""SecureToolWrapper and SecureWrappedLLM against an in-process OE (B-05, B-07, B-13, LG-08)."""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from agent_runtime.protocol import ToolExecuteAnswer, ToolExecuteRequest
from agent_runtime.sdk import (
    App,
    OEClient,
    PlatformFailure,
    PolicyDeniedException,
    RequestContext,
    SecureToolWrapper,
    SecureWrappedLLM,
    ToolExecutionError,
)
from agent_runtime.sdk.context import entrypoint_scope, run_scope
from agent_runtime.sdk.errors import SuspendRequested
from tests.conftest import free_port
from tests.unit.runtime.oe_double import ScriptedOE, ai, denied, failed, final, routed_back, suspended


class CountingModel:
    """A model object as the tenant registers it; in the AER it must never be called."""

    def __init__(self) -> None:
        self.calls = 0

    async def ainvoke(self, messages: list[dict[str, Any]], **_: Any) -> dict[str, Any]:
        self.calls += 1
        return ai("should never happen")


@pytest.fixture
def app() -> Iterator[App]:
    app = App()
    app.ran: list[str] = []  # type: ignore[attr-defined]

    @app.tool(is_local=True)
    def add(a: int, b: int = 1) -> int:
        """Add two numbers."""
        app.ran.append("add")  # type: ignore[attr-defined]
        return a + b

    @app.tool(is_local=True)
    async def explode() -> None:
        """Fail with a message the model must not see."""
        app.ran.append("explode")  # type: ignore[attr-defined]
        raise ValueError("internal detail 42")

    @app.tool(is_local=True, timeout_s=0.05)
    async def dawdle() -> str:
        """Take too long."""
        await asyncio.sleep(5)
        return "late"

    @app.tool(is_local=True)
    def ask_human(question: str) -> None:
        """Suspend for a human."""
        app.suspend("human review", {"question": question})

    @app.tool(is_local=True)
    def returns_object() -> object:
        """Return something JSON cannot carry."""
        return object()

    @app.tool
    def remote_only() -> str:
        """A Tool Pod tool: never run by the AER."""
        app.ran.append("remote_only")  # type: ignore[attr-defined]
        return "remote"

    yield app


def _run(oe: Any, body: Callable[[], Awaitable[Any]], *, construction: bool = False) -> Any:
    async def main() -> Any:
        context = RequestContext(execution_id="ex-1", construction=construction)
        with run_scope(context, oe=oe), entrypoint_scope():
            return await body()

    return asyncio.run(main())


def test_denied_call_raises_policy_denied_and_runs_nothing(app: App) -> None:
    oe = ScriptedOE(policy=lambda request: denied(request.step, "tool add is not allowed"))
    with pytest.raises(PolicyDeniedException) as denial:
        _run(oe, lambda: app.call_tool("add", {"a": 1}))
    assert denial.value.reason == "tool add is not allowed"
    assert app.ran == [] and oe.results == []  # type: ignore[attr-defined]
    assert isinstance(denial.value, Exception)  # a tool failure the model may be told


def test_callback_route_runs_the_local_body_and_reports_its_result(app: App) -> None:
    oe = ScriptedOE(local_tools={"add"})
    assert _run(oe, lambda: app.call_tool("add", {"a": 2, "b": 3})) == 5
    assert app.ran == ["add"]  # type: ignore[attr-defined]
    [request] = oe.requests
    assert (request.execution_id, request.step, request.tool, request.args) == (
        "ex-1",
        1,
        "add",
        {"a": 2, "b": 3},
    )
    [report] = oe.results
    assert (report.execution_id, report.step, report.status, report.result, report.error) == (
        "ex-1",
        1,
        "success",
        5,
        None,
    )
    assert report.duration_ms is not None and report.duration_ms >= 0


@pytest.mark.parametrize(
    ("tool", "args", "category", "text"),
    [
        ("add", {"b": 2}, "invalid_arguments", "a: Field required"),
        ("explode", {}, "tool_error", "tool 'explode' failed with ValueError; see the AER log"),
        ("dawdle", {}, "timeout", "timeout_s=0.05"),
        ("returns_object", {}, "tool_error", "not JSON-serializable"),
        ("remote_only", {}, "unknown_tool", "has no local tool"),
    ],
)
def test_local_failures_are_reported_then_raised_as_tool_errors(
    app: App, tool: str, args: dict[str, Any], category: str, text: str
) -> None:
    oe = ScriptedOE(policy=lambda request: routed_back(request.step))
    with pytest.raises(ToolExecutionError) as failure:
        _run(oe, lambda: app.call_tool(tool, args))
    assert failure.value.error.category == category and text in failure.value.error.explanation
    [report] = oe.results
    assert report.status == "error" and report.error == failure.value.error
    assert "internal detail 42" not in failure.value.error.explanation
    assert "add" not in app.ran and "remote_only" not in app.ran  # type: ignore[attr-defined]


def test_local_suspension_is_reported_then_reraised(app: App) -> None:
    oe = ScriptedOE(local_tools={"ask_human"})
    with pytest.raises(SuspendRequested) as signal:
        _run(oe, lambda: app.call_tool("ask_human", {"question": "ok?"}))
    assert (signal.value.reason, signal.value.payload, signal.value.step, signal.value.tool) == (
        "human review",
        {"question": "ok?"},
        1,
        "ask_human",
    )
    [report] = oe.results
    assert (report.status, report.result) == (
        "suspend",
        {"reason": "human review", "payload": {"question": "ok?"}},
    )


def test_unacknowledged_result_is_a_platform_failure_that_ends_the_turn(app: App) -> None:
    oe = ScriptedOE(local_tools={"add"}, acknowledge_results=False)

    async def body() -> None:
        try:
            await app.call_tool("add", {"a": 1})
        except Exception:  # agent code cannot swallow it this way
            pytest.fail("a platform failure was caught by `except Exception`")

    with pytest.raises(PlatformFailure, match="409"):
        _run(oe, body)

    async def keeps_going() -> None:
        with pytest.raises(PlatformFailure):
            await app.call_tool("add", {"a": 1})
        # Every later call in the turn fails too, without reaching the OE (LG-08).
        with pytest.raises(PlatformFailure, match="an earlier platform failure ended this turn"):
            await app.call_tool("remote_only")

    oe = ScriptedOE(local_tools={"add"}, acknowledge_results=False)
    _run(oe, keeps_going)
    assert [request.tool for request in oe.requests] == ["add"]


def test_final_outcomes_from_the_oe(app: App, caplog: pytest.LogCaptureFixture) -> None:
    answers: dict[str, Callable[[int], ToolExecuteAnswer]] = {
        "ok": lambda step: final(step, {"rows": 3}),
        "cached": lambda step: final(step, "from before", from_cache=True),
        "broken": lambda step: failed(step, "tool_pod_unreachable", "the Tool Pod did not answer"),
        "review": lambda step: suspended(step, {"reason": "approve?", "payload": {"amount": 3}}),
        "approval": lambda step: suspended(
            step, {"kind": "approval_required", "tool": "approval", "step": step}
        ),
        "diverged": lambda step: failed(step, "replay_diverged", "step 6 was another call"),
        "wrong_step": lambda step: final(step + 1, None),
        "empty": lambda step: ToolExecuteAnswer(step=step, proceed=True),
    }
    oe = ScriptedOE(policy=lambda request: answers[request.tool](request.step))

    async def body() -> dict[str, Any]:
        seen: dict[str, Any] = {"ok": await app.call_tool("ok"), "cached": await app.call_tool("cached")}
        for name, kind in (("broken", ToolExecutionError), ("review", SuspendRequested)):
            try:
                await app.call_tool(name)
            except kind as exc:
                seen[name] = exc
        try:
            await app.call_tool("approval")
        except SuspendRequested as exc:
            seen["approval"] = exc
        return seen

    with caplog.at_level(logging.INFO, logger="agent_runtime.sdk.secure"):
        seen = _run(oe, body)
    assert seen["ok"] == {"rows": 3} and seen["cached"] == "from before"
    assert "cached result: tool=cached step=2" in caplog.messages
    assert seen["broken"].error.category == "tool_pod_unreachable"
    assert (seen["review"].reason, seen["review"].payload, seen["review"].step) == (
        "approve?",
        {"amount": 3},
        4,
    )
    assert seen["approval"].reason == "approval_required"
    assert seen["approval"].metadata() == {
        "reason": "approval_required",
        "payload": {"kind": "approval_required", "tool": "approval", "step": 5},
        "step": 5,
        "tool": "approval",
    }
    for name, message in (
        ("diverged", "replay_diverged: step 6 was another call"),
        ("wrong_step", "the OE answered step 2 to the call at step 1"),
        ("empty", "has neither a route nor an outcome"),
    ):
        with pytest.raises(PlatformFailure, match=message):
            _run(oe, lambda name=name: app.call_tool(name))


def test_llm_calls_go_to_the_oe_and_return_its_ai_message() -> None:
    model = CountingModel()
    answer = ai("hello", tool_calls=[("c1", "add", {"a": 1})])
    oe = ScriptedOE(model_answers=[answer])
    llm = SecureWrappedLLM(model, llm_id="fast")
    messages = [{"type": "human", "content": "hi"}]
    tools = [{"name": "add", "description": "Add.", "inputSchema": {"type": "object"}}]
    assert _run(oe, lambda: llm.ainvoke(messages, tools=tools, temperature=0)) == answer
    [request] = oe.requests
    assert (request.tool, request.step, request.llm_id, request.messages, request.tools, request.options) == (
        "invoke_llm",
        1,
        "fast",
        messages,
        tools,
        {"temperature": 0},
    )
    assert model.calls == 0  # the AER never calls the model itself


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (lambda step: routed_back(step), "model calls run in the Tool Pod only"),
        (lambda step: final(step, "not a message"), "is not an AI message"),
        (lambda step: denied(step, "no models today"), "no models today"),
        (lambda step: failed(step, "rate_limited", "slow down"), "rate_limited: slow down"),
    ],
)
def test_llm_call_outcomes(answer: Callable[[int], ToolExecuteAnswer], error: str) -> None:
    oe = ScriptedOE(policy=lambda request: answer(request.step))
    llm = SecureWrappedLLM(CountingModel(), llm_id="default")
    with pytest.raises((PlatformFailure, PolicyDeniedException, ToolExecutionError), match=error):
        _run(oe, lambda: llm.ainvoke([{"type": "human", "content": "hi"}]))


def test_no_call_during_construction_or_outside_a_run(app: App) -> None:
    oe = ScriptedOE(local_tools={"add"})
    llm = SecureWrappedLLM(CountingModel(), llm_id="default")
    with pytest.raises(RuntimeError, match="during construction"):
        _run(oe, lambda: app.call_tool("add", {"a": 1}), construction=True)
    with pytest.raises(RuntimeError, match="during construction"):
        _run(oe, lambda: llm.ainvoke([{"type": "human", "content": "x"}]), construction=True)
    with pytest.raises(RuntimeError, match="no execution is running here"):
        SecureToolWrapper("add").ainvoke({"a": 1})
    assert oe.requests == [] and app.ran == []  # type: ignore[attr-defined]


def test_arguments_must_be_json() -> None:
    oe = ScriptedOE()
    with pytest.raises(TypeError, match="arguments of tool 'add' must be JSON-serializable"):
        _run(oe, lambda: SecureToolWrapper("add").ainvoke({"a": object()}))
    assert oe.requests == []


def test_with_the_oe_down_no_tool_body_and_no_model_call_runs(app: App) -> None:
    """The invariant: nothing runs without the OE's answer (B-05)."""
    model = CountingModel()

    async def body() -> None:
        oe = OEClient(f"http://127.0.0.1:{free_port()}", token="t")
        try:
            with (
                run_scope(RequestContext(execution_id="ex"), oe=oe, local_tools=app.tools),
                entrypoint_scope(),
            ):
                llm = app.llm(model)
                with pytest.raises(
                    PlatformFailure, match="POST /tool/execute to the OE failed: cannot connect"
                ):
                    await app.call_tool("add", {"a": 1})
                with pytest.raises(PlatformFailure):
                    await llm.ainvoke([{"type": "human", "content": "hi"}])
        finally:
            await oe.aclose()

    asyncio.run(body())
    assert app.ran == [] and model.calls == 0  # type: ignore[attr-defined]


def test_requests_carry_the_contract_fields() -> None:
    oe = ScriptedOE()
    _run(oe, lambda: SecureToolWrapper("echo_getItem").ainvoke({"itemId": "7"}))
    [request] = oe.requests
    assert isinstance(request, ToolExecuteRequest)
    assert request.model_dump(exclude_none=True) == {
        "execution_id": "ex-1",
        "step": 1,
        "tool": "echo_getItem",
        "args": {"itemId": "7"},
    }
