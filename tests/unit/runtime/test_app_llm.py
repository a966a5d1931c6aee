"""`app.llm`, `app.suspend`, `app.llms` and the entrypoint as a builder (B-02, B-09, B-10)."""

import asyncio
import inspect
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.protocol import AERExecuteRequest, CallbackStatus
from agent_runtime.sdk import App, RequestContext, SecureWrappedLLM
from agent_runtime.sdk.context import entrypoint_active, entrypoint_scope, run_scope
from agent_runtime.sdk.errors import SuspendRequested
from agent_runtime.servers.executions import run_execution
from tests.unit.runtime.oe_double import ScriptedOE


class Model:
    async def ainvoke(self, messages: list[dict[str, Any]], **_: Any) -> dict[str, Any]:
        raise AssertionError("never called in these tests")


def _line_of(marker: str, path: Path) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if marker in line)


def test_at_module_top_level_it_names_the_call_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "tenant_llm_top_level.py"
    module.write_text(
        "from agent_runtime.sdk import App\napp = App()\nmodel = object()\napp.llm(model)  # top level\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError) as error:
        __import__("tenant_llm_top_level")
    sys.modules.pop("tenant_llm_top_level", None)
    assert f"{module}:{_line_of('# top level', module)}" in str(error.value)
    assert "outside the @app.entrypoint" in str(error.value)


def test_from_a_helper_called_elsewhere_it_raises_naming_the_helper_line() -> None:
    app = App()

    def make_model() -> SecureWrappedLLM:
        return app.llm(Model(), llm_id="helper")  # helper line

    with pytest.raises(RuntimeError) as error:
        make_model()
    assert f"{__file__}:{_line_of('# helper line', Path(__file__))}" in str(error.value)
    assert dict(app.llms) == {}


def test_in_a_tool_body_it_raises_even_when_the_entrypoint_called_the_tool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = App()

    @app.tool(is_local=True)
    def sneaky() -> str:
        """Registers a model from a tool body."""
        app.llm(Model(), llm_id="from_tool")
        return "registered"

    @app.entrypoint
    def build(ctx: RequestContext) -> Any:
        async def run(_: Any) -> Any:
            return await app.call_tool("sneaky")

        return run

    oe = ScriptedOE(local_tools={"sneaky"})
    request = AERExecuteRequest(execution_id="ex", input=None)
    with caplog.at_level(logging.ERROR):
        callback = asyncio.run(run_execution(app, request, oe=oe, tools=[]))
    assert (
        callback.status is CallbackStatus.FAILED
    )  # the tool error reached the entrypoint, which did not catch it
    [report] = oe.results
    assert report.status == "error" and report.error is not None and report.error.category == "tool_error"
    assert "called at" in caplog.text and "outside the @app.entrypoint" in caplog.text
    assert "from_tool" not in app.llms


def test_in_the_builder_or_a_helper_it_calls_it_registers_and_returns_the_wrapper() -> None:
    app = App()
    fast, slow = Model(), Model()
    wrappers: list[SecureWrappedLLM] = []

    def register_slow() -> None:
        wrappers.append(app.llm(slow, llm_id="slow"))

    @app.entrypoint
    def build(ctx: RequestContext) -> Any:
        assert entrypoint_active()
        wrappers.append(app.llm(fast))
        register_slow()

        async def run(task: Any) -> Any:
            wrappers.append(app.llm(fast, llm_id="in_run"))  # the run is part of the entrypoint too
            return {"echo": task, "resume": ctx.resume}

        return run

    request = AERExecuteRequest(execution_id="ex", input={"q": 1}, resume=True)
    callback = asyncio.run(run_execution(app, request, oe=ScriptedOE(), tools=[]))
    assert (callback.status, callback.result) == (
        CallbackStatus.COMPLETED,
        {"echo": {"q": 1}, "resume": True},
    )
    assert dict(app.llms) == {"default": fast, "slow": slow, "in_run": fast}
    assert [w.llm_id for w in wrappers] == ["default", "slow", "in_run"]
    assert wrappers[0].wrapped is fast
    with pytest.raises(TypeError):
        app.llms["other"] = fast  # type: ignore[index]
    with pytest.raises(ValueError, match="llm_id"), entrypoint_scope():
        app.llm(fast, llm_id="")


def test_suspend_raises_the_internal_signal() -> None:
    app = App()
    with pytest.raises(SuspendRequested) as signal:
        app.suspend("needs a human", {"k": 1})
    assert (signal.value.reason, signal.value.payload) == ("needs a human", {"k": 1})
    assert not isinstance(signal.value, Exception)


def test_construct_builds_once_without_running_and_restores_the_registry_on_failure() -> None:
    app = App()
    attempts: list[RequestContext] = []
    ran: list[str] = []

    @app.entrypoint
    def build(ctx: RequestContext) -> Any:
        attempts.append(ctx)
        app.llm(Model(), llm_id=f"try{len(attempts)}")
        if len(attempts) == 1:
            raise ConnectionError("a start-up dependency is not there yet")

        async def run(_: Any) -> None:
            ran.append("run")

        return run

    context = RequestContext(execution_id="construction", construction=True)
    with pytest.raises(ConnectionError):
        app.construct(context)
    assert dict(app.llms) == {}  # rolled back
    app.construct(context)
    assert list(app.llms) == ["try2"] and ran == []
    assert all(ctx.construction for ctx in attempts)
    with pytest.raises(ValueError, match="construction context"):
        app.construct(RequestContext(execution_id="x"))


def test_async_entrypoint_is_the_run_function_and_construction_finds_nothing() -> None:
    app = App()
    calls: list[Any] = []

    @app.entrypoint
    async def run(task: Any) -> Any:
        calls.append(task)
        return task

    app.construct(RequestContext(execution_id="construction", construction=True))
    assert calls == [] and dict(app.llms) == {}
    with run_scope(RequestContext(execution_id="ex"), oe=None):
        runnable = app.build(RequestContext(execution_id="ex"))
    assert runnable is run and inspect.iscoroutinefunction(runnable)


def test_app_memory_is_the_process_memory_client(monkeypatch) -> None:
    from agent_runtime.sdk import App
    from agent_runtime.sdk.memory import shared_memory_client

    monkeypatch.setenv("AGENTIC_MEMORY_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("RUNTIME_TOKEN", "t")
    assert App("m").memory is shared_memory_client()
