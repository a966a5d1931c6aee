import asyncio
import logging

import pytest

from agent_runtime.protocol import CallOutcome
from agent_runtime.sdk import App, ToolDefinitionError
from agent_runtime.servers.metrics import ToolMetrics
from agent_runtime.servers.tool_calls import ExecuteRequest, ToolCallService
from agent_runtime.servers.tool_surface import DuplicateToolError, tool_surface

SECRET = "tenant-secret-value-123"


def _app() -> App:
    app = App()

    @app.tool
    def double(n: int) -> int:
        """Double a number."""
        return n * 2

    @app.tool(timeout_s=0.05)
    async def sleepy() -> str:
        """Sleep too long."""
        await asyncio.sleep(5)
        return "late"

    @app.tool(required_secrets=["TENANT_KEY"])
    def explode() -> None:
        """Fail, quoting the secret."""
        raise RuntimeError(f"provider said no to key {SECRET}")

    @app.tool(is_local=True)
    def local_only() -> str:
        """Runs in the AER."""
        return "local"

    return app


def _service(app: App) -> ToolCallService:
    metrics = ToolMetrics(component="tool", known_tools=frozenset(app.tools))
    return ToolCallService(
        connectors=[],
        tenant_tools=list(app.tools.values()),
        secret_env={"TENANT_KEY": SECRET},
        metrics=metrics,
    )


def _execute(service: ToolCallService, tool: str, arguments: dict[str, object]) -> CallOutcome:
    return asyncio.run(
        service.execute(ExecuteRequest(tool=tool, arguments=arguments, execution_id="e", step=1))
    )


def test_success_and_classified_failures(caplog: pytest.LogCaptureFixture) -> None:
    service = _service(_app())
    ok = _execute(service, "double", {"n": 21})
    assert (ok.status, ok.result, ok.error) == ("success", 42, None)
    assert _execute(service, "double", {"n": "x"}).error.category == "invalid_arguments"  # type: ignore[union-attr]
    assert _execute(service, "local_only", {}).error.category == "unknown_tool"  # type: ignore[union-attr]
    timeout = _execute(service, "sleepy", {}).error
    assert timeout is not None and (timeout.category, "timeout_s=0.05" in timeout.explanation) == (
        "timeout",
        True,
    )
    with caplog.at_level(logging.ERROR):
        failed = _execute(service, "explode", {})
    assert failed.error is not None and failed.error.category == "tool_error"
    assert failed.error.explanation == "tool 'explode' failed with RuntimeError; see the Tool Pod log"
    assert SECRET not in caplog.text and "provider said no to key [REDACTED]" in caplog.text


def test_missing_required_secret_refuses_to_start() -> None:
    app = _app()
    with pytest.raises(ToolDefinitionError, match="requires the secret env TENANT_KEY"):
        ToolCallService(
            connectors=[],
            tenant_tools=list(app.tools.values()),
            secret_env={},
            metrics=ToolMetrics(component="tool"),
        )


def test_surface_lists_tenant_tools_and_refuses_duplicates() -> None:
    app = _app()
    surface = tool_surface(connectors=[], tenant_tools=list(app.tools.values()))
    assert [entry["name"] for entry in surface] == ["double", "sleepy", "explode", "local_only"]
    other = App()

    @other.tool(name="double")
    def twice(n: int) -> int:
        """Also double."""
        return n + n

    with pytest.raises(DuplicateToolError, match="'double' is defined by both"):
        tool_surface(connectors=[], tenant_tools=[*app.tools.values(), *other.tools.values()])


def test_tenant_failures_are_told_apart() -> None:
    app = App()

    @app.tool
    async def own_timeout() -> None:
        """Raises TimeoutError itself, well within its timeout_s."""
        raise TimeoutError("socket read timed out")

    @app.tool
    def returns_object() -> object:
        """Returns something JSON cannot carry."""
        return object()

    @app.tool
    def inner_validation(n: int) -> int:
        """Fails validating its own data, after its arguments were fine."""
        return int(App.__name__) + n  # ValueError inside the tool, not an argument problem

    service = ToolCallService(
        connectors=[],
        tenant_tools=list(app.tools.values()),
        secret_env={},
        metrics=ToolMetrics(component="tool"),
    )
    assert _execute(service, "own_timeout", {}).error.category == "tool_error"  # type: ignore[union-attr]
    not_json = _execute(service, "returns_object", {}).error
    assert not_json is not None and "not JSON-serializable" in not_json.explanation
    assert _execute(service, "inner_validation", {"n": 1}).error.category == "tool_error"  # type: ignore[union-attr]
    assert _execute(service, "inner_validation", {}).error.category == "invalid_arguments"  # type: ignore[union-attr]


def test_suspend_is_a_status_not_result_content() -> None:
    app = App()

    @app.tool
    def review(amount: int) -> None:
        """Ask a human."""
        app.suspend("needs approval", {"amount": amount})

    @app.tool
    async def review_async() -> None:
        """Ask a human, from async code."""
        app.suspend("async review")

    @app.tool
    def says_suspend() -> dict[str, str]:
        """Returns data that merely looks like a suspension."""
        return {"status": "suspend", "reason": "just data"}

    @app.tool
    def bad_payload() -> None:
        """Suspends with a payload JSON cannot carry."""
        app.suspend("why", object())

    service = ToolCallService(
        connectors=[],
        tenant_tools=list(app.tools.values()),
        secret_env={},
        metrics=ToolMetrics(component="tool"),
        pod_name="tool-pod-7",
    )
    suspended = _execute(service, "review", {"amount": 5})
    assert (suspended.status, suspended.result, suspended.error) == (
        "suspend",
        {"reason": "needs approval", "payload": {"amount": 5}},
        None,
    )
    assert suspended.pod_name == "tool-pod-7"
    assert _execute(service, "review_async", {}).result == {"reason": "async review", "payload": None}
    data = _execute(service, "says_suspend", {})
    assert (data.status, data.result) == ("success", {"status": "suspend", "reason": "just data"})
    bad = _execute(service, "bad_payload", {})
    assert bad.status == "error" and bad.error is not None and bad.error.category == "tool_error"
    assert _execute(service, "nope", {}).pod_name == "tool-pod-7"
