"""An in-process Orchestration Engine for unit tests: it speaks the SDK's `OEApi` protocol, not HTTP.

`ScriptedOE` records every request and answers `/tool/execute` with a policy function. The default policy
routes local tools back to the AER, answers model calls from a queue of AI messages and echoes other tools.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from agent_runtime.protocol import (
    AGENT_SUSPEND,
    INVOKE_LLM,
    CallError,
    ExecutorCallback,
    ToolExecuteAnswer,
    ToolExecuteRequest,
    ToolResultRequest,
)
from agent_runtime.sdk import PlatformFailure

Policy = Callable[[ToolExecuteRequest], ToolExecuteAnswer | Awaitable[ToolExecuteAnswer]]


def routed_back(step: int) -> ToolExecuteAnswer:
    return ToolExecuteAnswer(step=step, proceed=True, route_to="callback")


def final(step: int, result: Any, *, from_cache: bool = False) -> ToolExecuteAnswer:
    return ToolExecuteAnswer(step=step, proceed=True, status="success", result=result, from_cache=from_cache)


def denied(step: int, reason: str) -> ToolExecuteAnswer:
    return ToolExecuteAnswer(step=step, proceed=False, reason=reason)


def failed(step: int, category: str, explanation: str = "it failed") -> ToolExecuteAnswer:
    error = CallError(category=category, explanation=explanation)
    return ToolExecuteAnswer(step=step, proceed=True, status="error", error=error)


def suspended(step: int, result: Any) -> ToolExecuteAnswer:
    return ToolExecuteAnswer(step=step, proceed=True, status="suspend", result=result)


def ai(content: str = "", *, tool_calls: Iterable[tuple[str, str, dict[str, Any]]] = ()) -> dict[str, Any]:
    """An AI message dict as the Tool Pod's model returns it; tool_calls are (id, name, args)."""
    return {
        "type": "ai",
        "content": content,
        "id": None,
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {},
        "tool_calls": [{"id": i, "name": n, "args": a} for i, n, a in tool_calls],
        "usage_metadata": None,
    }


class ScriptedOE:
    """Answers like the OE would; `policy` overrides the default for /tool/execute."""

    def __init__(
        self,
        *,
        local_tools: Iterable[str] = (),
        model_answers: Iterable[dict[str, Any]] = (),
        policy: Policy | None = None,
        acknowledge_results: bool = True,
    ) -> None:
        self.local_tools = set(local_tools)
        self.model_answers = list(model_answers)
        self.policy = policy
        self.acknowledge_results = acknowledge_results
        self.requests: list[ToolExecuteRequest] = []
        self.results: list[ToolResultRequest] = []
        self.callbacks: list[ExecutorCallback] = []
        self.callback_arrived = asyncio.Event()
        self.closed = False

    async def tool_execute(self, request: ToolExecuteRequest) -> ToolExecuteAnswer:
        self.requests.append(request)
        if self.policy is not None:
            answer = self.policy(request)
            return answer if isinstance(answer, ToolExecuteAnswer) else await answer
        if request.tool == AGENT_SUSPEND:
            # Like the OE: an agent-level suspension is held at its step; a test scripts its replay.
            held = {"kind": "suspend", **request.args, "step": request.step, "tool": AGENT_SUSPEND}
            return suspended(request.step, held)
        if request.tool == INVOKE_LLM:
            return final(request.step, self.model_answers.pop(0))
        if request.tool in self.local_tools:
            return routed_back(request.step)
        return final(request.step, {"tool": request.tool, "args": request.args})

    async def tool_result(self, request: ToolResultRequest) -> None:
        self.results.append(request)
        if not self.acknowledge_results:
            raise PlatformFailure("the OE answered HTTP 409 to POST /tool/result")

    async def callback(self, callback: ExecutorCallback) -> None:
        self.callbacks.append(callback)
        self.callback_arrived.set()

    async def aclose(self) -> None:
        self.closed = True

    @property
    def steps(self) -> list[tuple[int, str]]:
        return [(request.step, request.tool) for request in self.requests]
