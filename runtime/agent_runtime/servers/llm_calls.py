"""Model calls in the Tool Pod (`POST /invoke_llm`, B-11, B-12), free of HTTP.

The models are the ones the tenant's entrypoint registers with `app.llm(..., llm_id=...)`. The Tool Pod
finds them by building the entrypoint once at start-up with a construction context: the builder runs, its
runnable is never called, and the SDK's wrappers refuse every tool and model call meanwhile. A failed
construction is a WARNING (the Tool Pod keeps serving its tools), leaves the registry as it was, and is
retried by the next model call; a successful one is kept, even when it registered no model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from agent_runtime.llm_delta import DeltaStream
from agent_runtime.protocol import LLM_ERROR, UNKNOWN_LLM, CallError, CallOutcome, InvokeLLMRequest, LLMDelta
from agent_runtime.redaction import redacted_error, redactor_for
from agent_runtime.sdk import App, PlatformFailure, RequestContext
from agent_runtime.sdk.errors import SuspendRequested
from agent_runtime.sdk.tracking import run_tracked
from agent_runtime.servers.drain import WorkRegistry
from agent_runtime.servers.metrics import UNKNOWN_TOOL_LABEL, LLMMetrics

logger = logging.getLogger(__name__)

CONSTRUCTION_EXECUTION_ID = "construction"
# Where a streamed call's deltas go as they are made (the route's queue); it must not block.
DeltaSink = Callable[[LLMDelta], None]


def construction_context(*, tools: Sequence[dict[str, Any]], workspace_id: str = "") -> RequestContext:
    """The static context the Tool Pod builds the entrypoint with: no user, no session, no business turn."""
    return RequestContext(
        execution_id=CONSTRUCTION_EXECUTION_ID,
        workspace_id=workspace_id,
        tools=tuple(tools),
        construction=True,
    )


def _platform_model(model: Any) -> Any:
    """A LangChain chat model registered with the base `app.llm` speaks LangChain messages: adapt it.

    Only when langchain_core is already imported (a LangChain model cannot exist otherwise), so a Tool Pod
    without the `langgraph` extra never imports it.
    """
    chat_models = sys.modules.get("langchain_core.language_models")
    if chat_models is not None and isinstance(model, chat_models.BaseChatModel):
        from agent_runtime.langgraph.llm_adapter import LangChainModelAdapter

        return LangChainModelAdapter(model)
    return model


class _BadAnswerError(Exception):
    """The model's `ainvoke` returned something that is not an AI message."""

    category = LLM_ERROR

    def __init__(self, explanation: str) -> None:
        super().__init__(explanation)
        self.explanation = explanation


def _ai_message(raw: Any) -> dict[str, Any]:
    try:
        message = to_jsonable_python(raw)
    except PydanticSerializationError:
        raise _BadAnswerError(f"the model returned a {type(raw).__name__}, which is not JSON") from None
    if not isinstance(message, dict) or message.get("type") != "ai":
        raise _BadAnswerError(f"the model returned a {type(raw).__name__}, not an AI message dict")
    return message


class LLMCallService:
    """Builds the entrypoint once, then runs the registered models' `ainvoke` for each call."""

    def __init__(
        self,
        *,
        app: App | None,
        context: RequestContext,
        metrics: LLMMetrics,
        secret_values: Sequence[str] = (),
        pod_name: str | None = None,
        pod_address: str | None = None,
        work: WorkRegistry | None = None,
    ) -> None:
        self._app = app
        self._context = context
        self._metrics = metrics
        # Every outcome leaves redacted (the model's answer may quote a key a provider echoed).
        self._redactor = redactor_for(secret_values)
        self._pod_name = pod_name
        self._pod_address = pod_address
        # Model calls of an execution are tracked work, like tool calls (DR-12).
        self._work = work
        self._constructed = app is None
        self._lock = asyncio.Lock()

    @property
    def constructed(self) -> bool:
        return self._constructed

    async def construct(self) -> bool:
        """Build the entrypoint unless that already succeeded; True when the models are known."""
        if self._constructed:
            return True
        async with self._lock:
            if self._constructed or self._app is None:
                return True
            try:
                self._app.construct(self._context)
            except (Exception, PlatformFailure, SuspendRequested) as exc:
                logger.warning(
                    "building the entrypoint to find its models failed (%s); the Tool Pod serves its tools "
                    "and the next /invoke_llm tries again:\n%s",
                    type(exc).__name__,
                    self._redactor.text("".join(traceback.format_exception(exc)).rstrip()),
                )
                return False
            self._constructed = True
            logger.info("entrypoint built: model(s) %s", ", ".join(sorted(self._app.llms)) or "none")
            return True

    async def invoke(self, call: InvokeLLMRequest, *, on_delta: DeltaSink | None = None) -> CallOutcome:
        """Run one model call; never raises for a model failure, only reports it.

        With `on_delta`, the model's stream goes out as it arrives: each piece, redacted on a window, as an
        `LLMDelta`, the last one after the final message is known (the outcome holds it whole)."""
        started = time.perf_counter()
        await self.construct()
        model = self._app.llms.get(call.llm_id) if self._app is not None else None
        label = call.llm_id if model is not None else UNKNOWN_TOOL_LABEL
        error: CallError | None = None
        message: Any = None
        if model is None:
            error = self._unknown(call.llm_id)
        else:
            run = (
                (lambda: self._run(model, call))
                if on_delta is None
                else (lambda: self._run_streamed(model, call, on_delta))
            )
            try:
                message = await run_tracked(
                    self._work,
                    execution_id=call.execution_id,
                    step=call.step,
                    cancellable=True,
                    start=run,
                )
            except (Exception, PlatformFailure, SuspendRequested) as exc:
                error = self._classify(call.llm_id, exc)
        duration_s = time.perf_counter() - started
        if error is not None:
            logger.warning("model %s failed: %s", label, error.category)
            self._metrics.call_finished(llm_id=label, status="error", duration_s=duration_s)
            return CallOutcome(
                status="error",
                error=redacted_error(error, self._redactor),
                duration_ms=duration_s * 1000,
                pod_name=self._pod_name,
                pod_address=self._pod_address,
            )
        self._metrics.call_finished(
            llm_id=label, status="success", duration_s=duration_s, usage=message.get("usage_metadata")
        )
        return CallOutcome(
            status="success",
            result=self._redactor.value(message),
            duration_ms=duration_s * 1000,
            pod_name=self._pod_name,
            pod_address=self._pod_address,
        )

    @staticmethod
    async def _run(model: Any, call: InvokeLLMRequest) -> dict[str, Any]:
        model = _platform_model(model)
        options = dict(call.options or {})
        # `stream` is a parameter of its own; an option of that name must not collide with it.
        stream = call.stream or bool(options.pop("stream", False))
        raw = await model.ainvoke(call.messages, tools=call.tools, stream=stream, **options)
        return _ai_message(raw)

    async def _run_streamed(self, model: Any, call: InvokeLLMRequest, on_delta: DeltaSink) -> dict[str, Any]:
        """The model's own stream when it has one (`astream`: chunk events, then the final message);
        otherwise its answer as one delta."""
        model = _platform_model(model)
        options = dict(call.options or {})
        options.pop("stream", None)
        deltas = DeltaStream(self._redactor, step=call.step)
        raw: Any = None
        if callable(getattr(model, "astream", None)):
            stream = model.astream(call.messages, tools=call.tools, **options)
            async with contextlib.aclosing(stream) as events:
                async for event in events:
                    if isinstance(event, dict) and event.get("type") == "llm_chunk":
                        delta = deltas.chunk(event)
                        if delta is not None:
                            on_delta(delta)
                    else:
                        raw = event
        else:
            raw = await model.ainvoke(call.messages, tools=call.tools, stream=True, **options)
        message = _ai_message(raw)
        if deltas.count == 0:
            on_delta(deltas.whole(self._redactor.value(message), from_cache=False))
        else:
            on_delta(deltas.end_of(message))
        return message

    def _unknown(self, llm_id: str) -> CallError:
        known = ", ".join(sorted(self._app.llms)) if self._app is not None else ""
        if not self._constructed:
            why = "the entrypoint could not be built (see the Tool Pod log)"
        elif known:
            why = f"registered: {known}"
        else:
            why = "the entrypoint registered none (an async def entrypoint is never built, so it has none)"
        return CallError(
            category=UNKNOWN_LLM, explanation=f"no model is registered under llm_id {llm_id!r}; {why}"
        )

    def _classify(self, llm_id: str, exc: BaseException) -> CallError:
        """An exception that classifies itself (`.category`, `.explanation`) keeps it; others give a type."""
        category = getattr(exc, "category", None)
        explanation = getattr(exc, "explanation", None)
        if isinstance(category, str) and category and isinstance(explanation, str):
            status_code = getattr(exc, "status_code", None)
            return CallError(
                category=str(category)[:128],
                explanation=self._redactor.text(explanation)[:16_384],
                status_code=status_code if isinstance(status_code, int) else None,
            )
        # The message may quote a request or a key: only the type leaves the pod; the log keeps the rest.
        logger.error(
            "model %s raised %s:\n%s",
            llm_id,
            type(exc).__name__,
            self._redactor.text("".join(traceback.format_exception(exc)).rstrip()),
        )
        return CallError(
            category=LLM_ERROR,
            explanation=f"model {llm_id!r} failed with {type(exc).__name__}; see the Tool Pod log",
        )
