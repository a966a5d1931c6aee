"""An in-process OE double that replays like the OE (Decision 4): cache by step, fingerprint checked.

It answers invoke_llm from a queue of AI messages and tools by echoing, holds calls to `sensitive` tools
for approval (a `suspend` answer), and on a later run answers every step it holds from its cache; a step
whose fingerprint differs is answered `replay_diverged`, as the OE does. `lose` makes the next call of a
tool a platform failure (the OE's answer lost).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from agent_runtime.protocol import (
    INVOKE_LLM,
    REPLAY_DIVERGED,
    ToolExecuteAnswer,
    ToolExecuteRequest,
    ToolResultRequest,
)
from agent_runtime.sdk import PlatformFailure
from tests.unit.runtime.oe_double import ScriptedOE, failed, final, routed_back, suspended


def fingerprint(request: ToolExecuteRequest) -> str:
    body = (
        {"llm_id": request.llm_id, "messages": request.messages, "tools": request.tools}
        if request.tool == INVOKE_LLM
        else {"tool": request.tool, "args": request.args}
    )
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class ReplayingOE(ScriptedOE):
    def __init__(
        self,
        *,
        model_answers: Iterable[dict[str, Any]] = (),
        sensitive: Iterable[str] = (),
        local_tools: Iterable[str] = (),
        failing: dict[str, str] | None = None,
    ) -> None:
        super().__init__(local_tools=local_tools, model_answers=model_answers, policy=self._answer)
        self.sensitive = set(sensitive)
        self.failing = dict(failing or {})
        self.lose: set[str] = set()
        self.cache: dict[tuple[str, int], tuple[str, ToolExecuteAnswer]] = {}
        self.approved: set[int] = set()
        self.executed: list[tuple[int, str]] = []  # what really ran (not from the cache)
        self.llm_messages: list[list[dict[str, Any]]] = []
        self.routed: dict[int, str] = {}

    async def tool_result(self, request: ToolResultRequest) -> None:
        await super().tool_result(request)
        self.executed.append((request.step, "local"))
        answer = ToolExecuteAnswer(
            step=request.step, proceed=True, status=request.status, result=request.result, error=request.error
        )
        self.cache[request.execution_id, request.step] = (self.routed.pop(request.step), answer)

    def approve(self, step: int) -> None:
        self.approved.add(step)

    def _answer(self, request: ToolExecuteRequest) -> ToolExecuteAnswer:
        step, tool = request.step, request.tool
        if tool in self.lose:
            self.lose.discard(tool)
            raise PlatformFailure(f"the OE did not answer POST /tool/execute in time (step {step})")
        held = self.cache.get((request.execution_id, step))
        if held is not None:
            if held[0] != fingerprint(request):
                return failed(step, REPLAY_DIVERGED, f"step {step} was {held[1]} before")
            return held[1].model_copy(update={"from_cache": True})
        if tool in self.sensitive and step not in self.approved:
            return suspended(
                step, {"kind": "approval_required", "tool": tool, "args": request.args, "step": step}
            )
        if tool in self.local_tools:
            self.routed[step] = fingerprint(request)
            return routed_back(step)
        self.executed.append((step, tool))
        if tool == INVOKE_LLM:
            self.llm_messages.append(list(request.messages or []))
            answer = final(step, self.model_answers.pop(0))
        elif tool in self.failing:
            answer = failed(step, "tool_error", self.failing[tool])
        else:
            answer = final(step, {"tool": tool, "args": request.args})
        self.cache[request.execution_id, step] = (fingerprint(request), answer)
        return answer
