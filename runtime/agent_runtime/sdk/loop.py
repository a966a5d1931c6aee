"""The framework-less ReAct loop: ask the model, run the tools it asks for, repeat until it answers.

A tool failure or a policy denial becomes a tool message the model reads (B-05, Decision 7); a platform
failure or a suspension ends the turn (LG-08, OE-14). The tool calls of one model answer run concurrently,
their steps taken in the order the model listed them, so a resumed run numbers them the same way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from agent_runtime.sdk.errors import (
    PlatformFailure,
    PolicyDeniedException,
    SuspendRequested,
    ToolExecutionError,
)
from agent_runtime.sdk.secure import SecureWrappedLLM, call_tool

DEFAULT_MAX_TURNS = 8


class ToolLoopExhaustedError(RuntimeError):
    """The model still asked for tools after `max_turns` answers."""


async def tool_loop(
    llm: SecureWrappedLLM,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]],
    max_turns: int = DEFAULT_MAX_TURNS,
) -> dict[str, Any]:
    """Run the model with `tools` until it answers without tool calls; return that final AI message."""
    if max_turns < 1:
        raise ValueError(f"max_turns must be at least 1, got {max_turns}")
    history: list[dict[str, Any]] = [dict(message) for message in messages]
    for _ in range(max_turns):
        answer = await llm.ainvoke(history, tools=tools)
        history.append(answer)
        calls: list[dict[str, Any]] = list(answer.get("tool_calls") or [])
        if not calls:
            return answer
        outcomes = await asyncio.gather(*_start_calls(calls), return_exceptions=True)
        _raise_turn_enders(outcomes)
        history.extend(_tool_message(call, outcome) for call, outcome in zip(calls, outcomes, strict=True))
    raise ToolLoopExhaustedError(
        f"the model still asked for tools after {max_turns} answers; raise max_turns or narrow the task"
    )


def _start_calls(calls: Sequence[Mapping[str, Any]]) -> list[Coroutine[Any, Any, Any]]:
    """Start every call now, in order, so their steps follow the model's order."""
    started: list[Coroutine[Any, Any, Any]] = []
    try:
        for call in calls:
            started.append(call_tool(str(call.get("name", "")), call.get("args") or {}))
    except BaseException:
        for pending in started:
            pending.close()
        raise
    return started


def _raise_turn_enders(outcomes: Sequence[Any]) -> None:
    """A platform failure wins over a suspension; either ends the turn. Any other bug propagates too."""
    for kind in (PlatformFailure, SuspendRequested):
        for outcome in outcomes:
            if isinstance(outcome, kind):
                raise outcome
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(
            outcome, ToolExecutionError | PolicyDeniedException
        ):
            raise outcome


def _tool_message(call: Mapping[str, Any], outcome: Any) -> dict[str, Any]:
    """The tool message the model reads: the result, or the failure's safe text."""
    status = "error"
    if isinstance(outcome, ToolExecutionError):
        content = f"error ({outcome.error.category}): {outcome.error.explanation}"
    elif isinstance(outcome, PolicyDeniedException):
        content = f"denied by policy: {outcome.reason}"
    else:
        status = "success"
        content = outcome if isinstance(outcome, str) else json.dumps(outcome, ensure_ascii=False)
    return {
        "type": "tool",
        "content": content,
        "tool_call_id": call.get("id"),
        "name": call.get("name"),
        "status": status,
    }
