"""The AER's runs of the entrypoint: outcomes, callbacks, tracking, drain, and the thin HTTP handlers."""

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agent_runtime.connectors import compile_catalog
from agent_runtime.protocol import AERExecuteRequest, CallbackStatus, ExecutorCallback, ToolExecuteRequest
from agent_runtime.sdk import App, RequestContext
from agent_runtime.servers.aer import build_aer_app
from agent_runtime.servers.auth import ASGIApp
from agent_runtime.servers.executions import (
    ExecutionConflictError,
    ExecutionRunner,
    WorkspaceMismatchError,
    run_execution,
)
from agent_runtime.servers.metrics import ExecutionMetrics, ToolMetrics
from tests.unit.runtime.oe_double import ScriptedOE, failed, final, suspended

TOKEN = "aer-token"


async def _eventually(condition: Callable[[], object], *, timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    pytest.fail("the condition never held")


def _app(run: Callable[[Any], Awaitable[Any]]) -> App:
    app = App()

    @app.entrypoint
    def build(ctx: RequestContext) -> Callable[[Any], Awaitable[Any]]:
        return run

    return app


def _execute(app: App, oe: ScriptedOE | None = None, **fields: Any) -> ExecutorCallback:
    request = AERExecuteRequest(execution_id="ex-1", **{"input": {"q": 1}, **fields})
    return asyncio.run(run_execution(app, request, oe=oe or ScriptedOE(), tools=[]))


def test_completed_with_the_runnable_result_and_the_context_it_was_built_with() -> None:
    app = App()
    seen: list[RequestContext] = []

    @app.entrypoint
    def build(ctx: RequestContext) -> Any:
        seen.append(ctx)

        class Graph:
            async def ainvoke(self, task: Any) -> Any:
                return {"answer": task["q"] + 1}

        return Graph()

    request = AERExecuteRequest(
        execution_id="ex-9", session_id="s", workspace_id="ns.agent", user_id="u", org_id="o", input={"q": 1}
    )
    tools = [{"name": "t", "description": "T.", "inputSchema": {"type": "object"}}]
    callback = asyncio.run(run_execution(app, request, oe=ScriptedOE(), tools=tools))
    assert callback == ExecutorCallback(
        execution_id="ex-9", status=CallbackStatus.COMPLETED, result={"answer": 2}
    )
    [ctx] = seen
    assert (ctx.execution_id, ctx.session_id, ctx.workspace_id, ctx.user_id, ctx.org_id, ctx.resume) == (
        "ex-9",
        "s",
        "ns.agent",
        "u",
        "o",
        False,
    )
    assert ctx.tools == tuple(tools) and ctx.construction is False


def test_async_entrypoint_runs_directly() -> None:
    app = App()

    @app.entrypoint
    async def run(task: dict[str, Any]) -> dict[str, Any]:
        return {"echo": task}

    assert _execute(app).result == {"echo": {"q": 1}}


async def _not_json(_: Any) -> Any:
    return object()


async def _raises(_: Any) -> Any:
    raise KeyError("missing thing")


async def _exits(_: Any) -> Any:
    raise SystemExit(3)


async def _suspends(_: Any) -> Any:
    App().suspend("wait for a human", {"draft": "x"})


@pytest.mark.parametrize(
    ("run", "status", "category", "text"),
    [
        (
            _not_json,
            CallbackStatus.FAILED,
            "invalid_result",
            "the entrypoint returned a object, which is not JSON-serializable",
        ),
        (_raises, CallbackStatus.FAILED, "entrypoint_error", "KeyError: 'missing thing'"),
        (_exits, CallbackStatus.FAILED, "entrypoint_error", "SystemExit: 3"),
    ],
)
def test_failures_are_classified(run: Any, status: CallbackStatus, category: str, text: str) -> None:
    callback = _execute(_app(run))
    assert callback.status is status and callback.error is not None
    assert (callback.error.category, callback.error.explanation) == (category, text)


def test_builder_mistakes_are_entrypoint_errors() -> None:
    app = App()

    @app.entrypoint
    def build(ctx: RequestContext) -> Any:
        return 42

    callback = _execute(app)
    assert callback.error is not None and callback.error.category == "entrypoint_error"
    assert "returned a int; return an async run(input)" in callback.error.explanation


def test_suspended_by_the_agent_or_by_the_oe() -> None:
    oe = ScriptedOE()
    callback = _execute(_app(_suspends), oe)
    # Agent-level app.suspend is a step: the OE holds it there before the run says SUSPENDED.
    assert oe.steps == [(1, "app.suspend")]
    assert oe.requests[0].args == {"reason": "wait for a human", "payload": {"draft": "x"}}
    assert (callback.status, callback.metadata) == (
        CallbackStatus.SUSPENDED,
        {
            "reason": "wait for a human",
            "payload": {"draft": "x"},
            "step": 1,
            "tool": "app.suspend",
        },
    )
    app = App()

    @app.entrypoint
    async def run(_: Any) -> Any:
        return await app.call_tool("approve_payment", {"amount": 3})

    oe = ScriptedOE(policy=lambda r: suspended(r.step, {"kind": "approval_required", "tool": r.tool}))
    callback = _execute(app, oe)
    assert callback.status is CallbackStatus.SUSPENDED
    assert callback.metadata == {
        "reason": "approval_required",
        "payload": {"kind": "approval_required", "tool": "approve_payment"},
        "step": 1,
        "tool": "approve_payment",
    }


def _review_agent(seen: list[Any]) -> App:
    app = App()

    @app.entrypoint
    async def run(_: Any) -> Any:
        await app.call_tool("lookup", {"id": 1})
        decision = app.suspend("approve the refund?", {"amount": 30})
        seen.append(decision)
        return await app.call_tool("notify", {"decision": decision["decision"]})

    return app


def test_agent_level_suspend_replays_as_the_human_decision_and_is_confirmed_with_the_oe() -> None:
    seen: list[Any] = []
    reply = {"step": 2, "reason": "approve the refund?", "payload": {"amount": 30}, "decision": "approved"}
    decided = {"decision": "approved", "reviewer_notes": None}

    def oe_answer(request: ToolExecuteRequest) -> Any:
        if request.tool == "app.suspend":
            return final(request.step, decided, from_cache=True)
        return final(request.step, {"tool": request.tool}, from_cache=request.step == 1)

    oe = ScriptedOE(policy=oe_answer)
    callback = _execute(_review_agent(seen), oe, resume=True, suspend_replies=[reply])
    assert callback.status is CallbackStatus.COMPLETED, callback
    assert seen == [decided]
    # The replayed suspension is confirmed as step 2 before step 3 is asked.
    assert oe.steps == [(1, "lookup"), (2, "app.suspend"), (3, "notify")]


def test_agent_level_suspend_whose_reply_differs_suspends_and_a_diverged_confirmation_fails() -> None:
    seen: list[Any] = []
    other = {"step": 2, "reason": "another question", "payload": None, "decision": "approved"}
    oe = ScriptedOE()
    callback = _execute(_review_agent(seen), oe, resume=True, suspend_replies=[other])
    assert callback.status is CallbackStatus.SUSPENDED and seen == []
    assert oe.steps == [(1, "lookup"), (2, "app.suspend")]

    reply = {**other, "reason": "approve the refund?", "payload": {"amount": 30}}

    def diverged(request: ToolExecuteRequest) -> Any:
        if request.tool == "app.suspend":
            return failed(request.step, "replay_diverged", "step 2 was another call")
        return final(request.step, {"tool": request.tool})

    oe = ScriptedOE(policy=diverged)
    callback = _execute(_review_agent(seen), oe, resume=True, suspend_replies=[reply])
    assert callback.status is CallbackStatus.FAILED and callback.error is not None
    assert (callback.error.category, callback.error.explanation) == (
        "platform_failure",
        "step 2 was another call",
    )
    # Nothing after the diverged step was asked.
    assert oe.steps == [(1, "lookup"), (2, "app.suspend")]


def test_app_suspend_in_agent_code_needs_a_reason() -> None:
    app = App()

    @app.entrypoint
    async def run(_: Any) -> Any:
        app.suspend("  ")

    callback = _execute(app)
    assert callback.error is not None and "needs a non-empty reason" in callback.error.explanation


def test_platform_failure_fails_the_run_even_when_agent_code_swallows_it() -> None:
    app = App()

    @app.entrypoint
    async def run(_: Any) -> Any:
        with contextlib.suppress(BaseException):  # a bare swallow must not turn it into a success
            await app.call_tool("anything")
        return "pretend all is well"

    oe = ScriptedOE(policy=lambda r: failed(r.step, "replay_diverged", "step 1 was another tool"))
    callback = _execute(app, oe)
    assert callback.status is CallbackStatus.FAILED and callback.error is not None
    assert (callback.error.category, callback.error.explanation) == (
        "platform_failure",
        "step 1 was another tool",
    )


def _runner(app: App, oe: ScriptedOE, *, app_id: str | None = None) -> ExecutionRunner:
    metrics = ExecutionMetrics(ToolMetrics(component="aer").registry, component="aer")
    return ExecutionRunner(app=app, oe=oe, tools=[], metrics=metrics, app_id=app_id)


def test_runner_tracks_runs_refuses_duplicates_and_other_workspaces_and_survives_failures() -> None:
    release = asyncio.Event()
    app = App()

    @app.entrypoint
    async def run(task: Any) -> Any:
        if task == "boom":
            raise RuntimeError("boom")
        await release.wait()
        return task

    oe = ScriptedOE()

    async def main() -> None:
        runner = _runner(app, oe, app_id="ns.agent")
        runner.start(AERExecuteRequest(execution_id="a", workspace_id="ns.agent", input="A"))
        with pytest.raises(ExecutionConflictError):
            runner.start(AERExecuteRequest(execution_id="a", workspace_id="ns.agent", input="again"))
        with pytest.raises(WorkspaceMismatchError):
            runner.start(AERExecuteRequest(execution_id="b", workspace_id="ns.other"))
        runner.start(AERExecuteRequest(execution_id="c", workspace_id="ns.agent", input="boom"))
        await _eventually(lambda: len(oe.callbacks) == 1)
        assert runner.is_running("a") and not runner.is_running("c") and not runner.is_running("b")
        release.set()
        await _eventually(lambda: runner.running == 0)
        # A finished execution may be started again (a resume).
        runner.start(AERExecuteRequest(execution_id="a", workspace_id="ns.agent", input="A2", resume=True))
        await runner.shutdown(5)

    asyncio.run(main())
    assert [(c.execution_id, c.status.value, c.result) for c in oe.callbacks] == [
        ("c", "FAILED", None),
        ("a", "COMPLETED", "A"),
        ("a", "COMPLETED", "A2"),
    ]


def test_shutdown_waits_then_cancels_and_reports_failed() -> None:
    app = App()

    @app.entrypoint
    async def run(task: Any) -> Any:
        await asyncio.sleep(task)
        return task

    oe = ScriptedOE()

    async def main() -> None:
        runner = _runner(app, oe)
        runner.start(AERExecuteRequest(execution_id="quick", input=0.05))
        runner.start(AERExecuteRequest(execution_id="stuck", input=60))
        await runner.shutdown(0.5)
        assert runner.running == 0

    asyncio.run(main())
    outcome = {c.execution_id: c for c in oe.callbacks}
    assert outcome["quick"].status is CallbackStatus.COMPLETED
    stuck = outcome["stuck"]
    assert stuck.status is CallbackStatus.FAILED and stuck.error is not None
    assert (stuck.error.category, stuck.error.explanation) == (
        "platform_failure",
        "the AER shut down before the run finished",
    )


async def _asgi(app: ASGIApp, method: str, *, path: str, body: bytes = b"") -> tuple[int, Any]:
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-length", str(len(body)).encode())]
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 8001),
        "client": ("127.0.0.1", 5000),
        "root_path": "",
    }
    await app(scope, receive, send)
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(payload) if payload else None


def test_http_surface() -> None:
    release = asyncio.Event()
    tenant = App()

    @tenant.tool(is_local=True)
    def count(text: str) -> int:
        """Count words."""
        return len(text.split())

    @tenant.tool(sensitive=True)
    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    @tenant.entrypoint
    async def run(task: Any) -> Any:
        await release.wait()
        return await tenant.call_tool("count", {"text": task})

    catalog = compile_catalog(
        {
            "openapi": "3.0.3",
            "info": {"title": "t", "version": "1"},
            "servers": [{"url": "http://127.0.0.1:9"}],
            "paths": {
                "/items": {
                    "get": {"operationId": "list", "responses": {"200": {"description": "ok"}}},
                    "post": {"operationId": "create", "responses": {"200": {"description": "ok"}}},
                }
            },
        },
        connector_name="shop",
    )
    oe = ScriptedOE(local_tools={"count"})
    aer = build_aer_app(connectors=[catalog], app=tenant, token=TOKEN, oe=oe, app_id="ns.agent")

    async def main() -> None:
        body = json.dumps({"execution_id": "ex-1", "workspace_id": "ns.agent", "input": "a b c"}).encode()
        assert await _asgi(aer, "POST", path="/execute", body=body) == (
            202,
            {"execution_id": "ex-1", "state": "running"},
        )
        assert await _asgi(aer, "GET", path="/executions/ex-1") == (
            200,
            {"execution_id": "ex-1", "state": "running"},
        )
        assert (await _asgi(aer, "POST", path="/execute", body=body))[0] == 409
        other = json.dumps({"execution_id": "ex-2", "workspace_id": "ns.other"}).encode()
        assert (await _asgi(aer, "POST", path="/execute", body=other))[0] == 404
        status, problems = await _asgi(aer, "POST", path="/execute", body=b'{"input": 1, "resume": "maybe"}')
        assert status == 400
        assert {p["field"] for p in problems["detail"]} == {"execution_id", "resume"}
        assert (await _asgi(aer, "POST", path="/execute", body=b"not json"))[0] == 400
        assert (await _asgi(aer, "POST", path="/execute", body=b"x" * (8 * 1024 * 1024 + 1)))[0] == 413
        release.set()
        await oe.callback_arrived.wait()
        for _ in range(500):  # the run leaves the table once its callback is delivered
            if (await _asgi(aer, "GET", path="/executions/ex-1"))[0] == 404:
                break
            await asyncio.sleep(0.01)
        else:
            pytest.fail("the finished execution is still listed as running")
        status, listing = await _asgi(aer, "GET", path="/tools")
        assert status == 200
        flags = {t["name"]: (t["is_local"], t["sensitive"]) for t in listing["tools"]}
        assert flags == {
            "shop_list": (False, False),
            "shop_create": (False, True),
            "count": (True, False),
            "pay": (False, True),
        }

    asyncio.run(main())
    [callback] = oe.callbacks
    assert (callback.status, callback.result) == (CallbackStatus.COMPLETED, 3)
    assert isinstance(oe.requests[0], ToolExecuteRequest) and oe.requests[0].tool == "count"
