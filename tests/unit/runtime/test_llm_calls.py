"""The Tool Pod's model calls: start-up construction (B-11) and `/invoke_llm` outcomes (B-12)."""

import asyncio
import logging
from typing import Any

import pytest

from agent_runtime.protocol import CallOutcome, InvokeLLMRequest
from agent_runtime.sdk import App, RequestContext
from agent_runtime.servers.llm_calls import LLMCallService, construction_context
from agent_runtime.servers.metrics import LLMMetrics, ToolMetrics
from tests.unit.runtime.oe_double import ai

SECRET = "llm-key-value-5551"
MESSAGES = [{"type": "human", "content": "hi"}]


class FixedModel:
    """A tenant model that answers a fixed AI message and records how it was called."""

    def __init__(self, answer: Any = None) -> None:
        self.answer = ai("fixed answer") if answer is None else answer
        self.calls: list[dict[str, Any]] = []

    async def ainvoke(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        self.calls.append({"messages": messages, **kwargs})
        return self.answer


class Classified(Exception):
    def __init__(self) -> None:
        super().__init__(f"429 with key {SECRET}")
        self.category = "rate_limited"
        self.explanation = f"the provider is rate limiting (key {SECRET} redacted here)"
        self.status_code = 429


class ExplodingModel:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def ainvoke(self, messages: list[dict[str, Any]], **_: Any) -> Any:
        raise self.exc


def _service(app: App | None) -> LLMCallService:
    context = construction_context(
        tools=[{"name": "t", "description": "T.", "inputSchema": {}}], workspace_id="w"
    )
    metrics = LLMMetrics(ToolMetrics(component="tool").registry, component="tool")
    return LLMCallService(
        app=app, context=context, metrics=metrics, secret_values=[SECRET], pod_name="tool-0"
    )


def _invoke(service: LLMCallService, llm_id: str = "default", **fields: Any) -> CallOutcome:
    return asyncio.run(service.invoke(InvokeLLMRequest(llm_id=llm_id, messages=MESSAGES, **fields)))


def test_construction_registers_models_without_running_anything() -> None:
    app = App()
    model = FixedModel()
    built: list[RequestContext] = []
    ran: list[str] = []

    @app.tool(is_local=True)
    def local_tool() -> str:
        """A tool that must not run during construction."""
        ran.append("tool")
        return "x"

    @app.entrypoint
    def build(ctx: RequestContext) -> Any:
        built.append(ctx)
        app.llm(model, llm_id="default")

        async def run(_: Any) -> Any:
            ran.append("run")

        return run

    service = _service(app)
    assert asyncio.run(service.construct()) is True
    [ctx] = built
    assert (ctx.construction, ctx.execution_id, ctx.workspace_id, ctx.user_id) == (
        True,
        "construction",
        "w",
        None,
    )
    assert [t["name"] for t in ctx.tools] == ["t"]
    assert ran == [] and model.calls == []
    outcome = _invoke(service, tools=[{"name": "t"}], options={"temperature": 0.2}, stream=True)
    assert (outcome.status, outcome.result, outcome.error, outcome.pod_name) == (
        "success",
        model.answer,
        None,
        "tool-0",
    )
    assert model.calls == [
        {"messages": MESSAGES, "tools": [{"name": "t"}], "stream": True, "temperature": 0.2}
    ]
    _invoke(service)
    assert len(built) == 1  # built once, reused for every call


def test_a_builder_that_calls_a_tool_or_model_fails_construction_and_is_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = App()
    model = FixedModel()
    attempts: list[int] = []

    @app.tool(is_local=True)
    def probe() -> str:
        """Must never run during construction."""
        raise AssertionError("tool body ran during construction")

    @app.entrypoint
    def build(ctx: RequestContext) -> Any:
        attempts.append(1)
        llm = app.llm(model, llm_id="default")
        if len(attempts) == 1:
            llm.ainvoke(MESSAGES)  # refused: RuntimeError before any call is made
        if len(attempts) == 2:
            app.call_tool("probe")  # refused too

        async def run(_: Any) -> Any:
            return None

        return run

    service = _service(app)
    with caplog.at_level(logging.WARNING, logger="agent_runtime.servers.llm_calls"):
        assert asyncio.run(service.construct()) is False
    [warning] = [r for r in caplog.records if r.name == "agent_runtime.servers.llm_calls"]
    assert warning.levelno == logging.WARNING and "during construction" in warning.getMessage()
    assert dict(app.llms) == {}  # the registration made before the failure was rolled back
    refused = _invoke(service)  # the next model call retries construction, which fails again
    assert len(attempts) == 2 and refused.status == "error" and refused.error is not None
    assert refused.error.category == "unknown_llm" and "could not be built" in refused.error.explanation
    assert _invoke(service).status == "success" and len(attempts) == 3  # third time lucky
    assert model.calls == [{"messages": MESSAGES, "tools": None, "stream": False}]


def test_success_with_zero_models_is_cached() -> None:
    app = App()
    builds: list[int] = []

    @app.entrypoint
    def build(ctx: RequestContext) -> Any:
        builds.append(1)

        async def run(_: Any) -> Any:
            return None

        return run

    service = _service(app)
    assert asyncio.run(service.construct()) and service.constructed
    unknown = _invoke(service, "fast")
    assert unknown.error is not None and unknown.error.category == "unknown_llm"
    assert "'fast'; the entrypoint registered none" in unknown.error.explanation
    assert builds == [1]


def test_without_an_app_or_with_an_async_entrypoint_no_model_is_known() -> None:
    assert _invoke(_service(None)).error.category == "unknown_llm"  # type: ignore[union-attr]
    app = App()

    @app.entrypoint
    async def run(_: Any) -> Any:
        app.llm(FixedModel())  # never reached: an async entrypoint is not built

    outcome = _invoke(_service(app))
    assert outcome.error is not None and "async def entrypoint is never built" in outcome.error.explanation


@pytest.mark.parametrize(
    ("model", "category", "explanation"),
    [
        (
            ExplodingModel(Classified()),
            "rate_limited",
            "the provider is rate limiting (key [REDACTED] redacted here)",
        ),
        (
            ExplodingModel(RuntimeError(f"boom {SECRET}")),
            "llm_error",
            "model 'default' failed with RuntimeError; see the Tool Pod log",
        ),
        (FixedModel(answer={"type": "human", "content": "?"}), "llm_error", "not an AI message dict"),
        (FixedModel(answer=object()), "llm_error", "which is not JSON"),
    ],
)
def test_model_failures_are_classified_without_leaking(model: Any, category: str, explanation: str) -> None:
    app = App()

    @app.entrypoint
    def build(ctx: RequestContext) -> Any:
        app.llm(model)
        return lambda _: None

    outcome = _invoke(_service(app))
    assert outcome.status == "error" and outcome.error is not None
    assert outcome.error.category == category and explanation in outcome.error.explanation
    assert SECRET not in outcome.model_dump_json()
