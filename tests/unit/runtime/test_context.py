"""The per-execution context: RequestContext, deterministic step numbers, logs tagged in threads and tasks."""

import asyncio
import io
import json
import logging
import threading

import pytest

from agent_runtime.logging_config import JsonFormatter, execution_id_var
from agent_runtime.protocol import ToolExecuteAnswer, ToolExecuteRequest
from agent_runtime.sdk import App, RequestContext, call_tool, current_context
from agent_runtime.sdk.context import RunState, current_run, run_scope
from tests.unit.runtime.oe_double import ScriptedOE, final


def test_request_context_is_frozen_and_current_only_inside_a_run() -> None:
    context = RequestContext(execution_id="ex-1", session_id="s", user_id="u", resume=True)
    with pytest.raises(AttributeError):
        context.resume = False  # type: ignore[misc]
    with pytest.raises(RuntimeError, match="no execution is running here"):
        current_context()
    with run_scope(context, oe=None):
        assert current_context() is context
        assert execution_id_var.get() == "ex-1"
    assert execution_id_var.get() is None
    with pytest.raises(RuntimeError):
        current_context()


def test_steps_count_from_one_in_call_order_per_run() -> None:
    first = RunState(context=RequestContext(execution_id="a"))
    assert [first.allocate_step() for _ in range(3)] == [1, 2, 3]
    assert RunState(context=RequestContext(execution_id="a")).allocate_step() == 1  # a resume starts at 1


def test_steps_are_taken_when_a_call_is_made_not_when_it_is_awaited() -> None:
    async def slow_first(request: ToolExecuteRequest) -> ToolExecuteAnswer:
        await asyncio.sleep(0.05 if request.tool == "first" else 0)  # the first call finishes last
        return final(request.step, request.tool)

    oe = ScriptedOE(policy=slow_first)

    async def run() -> list[object]:
        with run_scope(RequestContext(execution_id="ex"), oe=oe):
            gathered = list(await asyncio.gather(call_tool("first"), call_tool("second"), call_tool("third")))
            made_first, made_second = call_tool("fourth"), call_tool("fifth")
            await made_second  # awaited first, still numbered as made
            await made_first
            return gathered

    assert asyncio.run(run()) == ["first", "second", "third"]
    assert oe.steps == [(1, "first"), (2, "second"), (3, "third"), (5, "fifth"), (4, "fourth")]


def test_child_tasks_share_the_run_and_its_counter() -> None:
    oe = ScriptedOE()

    async def run() -> None:
        with run_scope(RequestContext(execution_id="ex"), oe=oe) as state:

            async def child() -> RunState:
                await call_tool("in_child")
                return current_run()

            assert await asyncio.create_task(child()) is state
            await call_tool("after")

    asyncio.run(run())
    assert oe.steps == [(1, "in_child"), (2, "after")]


def test_sync_local_tool_logs_with_its_execution_id_and_step_from_a_worker_thread() -> None:
    app = App()
    threads: list[str] = []
    tool_logger = logging.getLogger("tenant.tools")

    @app.tool(is_local=True)
    def lookup(key: str) -> str:
        """Look a key up (synchronously)."""
        threads.append(threading.current_thread().name)
        tool_logger.warning("looking up %s", key)
        return key.upper()

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    tool_logger.addHandler(handler)
    oe = ScriptedOE(local_tools={"lookup"})

    async def run() -> object:
        with run_scope(RequestContext(execution_id="ex-thread"), oe=oe):
            await app.call_tool("other")
            return await app.call_tool("lookup", {"key": "k"})

    try:
        assert asyncio.run(run()) == "K"
    finally:
        tool_logger.removeHandler(handler)
    assert threads and threads[0] != threading.main_thread().name
    [record] = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert (record["message"], record["execution_id"], record["step"]) == ("looking up k", "ex-thread", 2)
