"""The OE's side of a streamed model call: the Tool Pod's deltas become the execution's `llm_delta` events.

Each delta is redacted again here, on a window, with every secret the OE knows for the caller (its
runtime tokens, the OE's client token), then published; the outcome (the final message) goes to the replay
cache and the audit as for any call. A call that stops part-way (a cancel drains the Tool Pod, which closes
its request to the provider) leaves its partial text for the audit. A replayed step's cached message goes
out as one delta marked `from_cache`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from agent_runtime.llm_delta import DeltaStream, merged
from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.store.base import ExecutionRecord
from agent_runtime.protocol import CallOutcome, InvokeLLMRequest, LLMDelta, ToolExecuteRequest
from agent_runtime.redaction import Redactor

LLM_DELTA = "llm_delta"

# The deltas published during one /tool/execute request whose agent streams (collected for its answer).
_collected: ContextVar[list[LLMDelta] | None] = ContextVar("oe_collected_deltas", default=None)


@contextlib.contextmanager
def collecting_deltas() -> Iterator[list[LLMDelta]]:
    """Within: every delta this request publishes is also appended to the yielded list."""
    collected: list[LLMDelta] = []
    token = _collected.set(collected)
    try:
        yield collected
    finally:
        _collected.reset(token)


def _collect(delta: LLMDelta) -> None:
    collected = _collected.get()
    if collected is not None:
        collected.append(delta)


Publish = Callable[[LLMDelta], Awaitable[Any]]


class _StreamingRuntimes(Protocol):
    async def invoke_llm_streamed(
        self,
        reg: AgentRegistration,
        request: InvokeLLMRequest,
        *,
        on_delta: Callable[[list[LLMDelta]], Awaitable[None]],
    ) -> CallOutcome: ...


@dataclass(frozen=True)
class StreamedOutcome:
    outcome: CallOutcome
    deltas: int
    partial_text: str | None  # what the client saw of a call that did not succeed (None: it succeeded)


def wants_stream(record: ExecutionRecord, call: ToolExecuteRequest) -> bool:
    """A model call streams when its client asked (`stream: true` on /invoke) or its agent did (`astream`)."""
    return call.is_llm and (record.stream or bool(call.stream))


def delta_data(delta: LLMDelta) -> dict[str, Any]:
    """The `llm_delta` event's data: every field, empty ones left out but `text` and `index`."""
    data = delta.model_dump(mode="json", exclude_defaults=True)
    data.setdefault("index", delta.index)
    data.setdefault("text", delta.text)
    return data


async def streamed_llm_call(
    runtimes: _StreamingRuntimes,
    caller: AgentRegistration,
    request: InvokeLLMRequest,
    *,
    redactor: Redactor,
    publish: Publish,
) -> StreamedOutcome:
    """Run the call through the Tool Pod's stream, publishing each delta as it arrives."""
    deltas = DeltaStream(redactor, step=request.step)
    published = 0

    async def on_delta(arrived: list[LLMDelta]) -> None:
        # What arrived in one read goes out as one event: a publisher behind the stream catches up.
        nonlocal published
        relayed = [out for delta in arrived if (out := deltas.relay(delta)) is not None]
        if relayed:
            # Numbered as published (0, 1, 2 ...), whatever the Tool Pod's own numbering was.
            one = (
                relayed[0].model_copy(update={"index": published})
                if len(relayed) == 1
                else merged(relayed, index=published)
            )
            await publish(one)
            _collect(one)
            published += 1

    outcome = await runtimes.invoke_llm_streamed(caller, request, on_delta=on_delta)
    if outcome.status == "success":
        return StreamedOutcome(outcome=outcome, deltas=published, partial_text=None)
    held = deltas.end(finish_reason=None, usage=None) if deltas.count else None
    partial = deltas.partial_text if held is not None else ""
    return StreamedOutcome(outcome=outcome, deltas=published, partial_text=partial)


async def publish_cached(outcome: CallOutcome, *, step: int, publish: Publish, redactor: Redactor) -> bool:
    """A replayed model step's cached final message as one `from_cache` delta; False when not a message."""
    message = outcome.result
    if outcome.status != "success" or not isinstance(message, dict) or message.get("type") != "ai":
        return False
    whole = DeltaStream(redactor, step=step).whole(redactor.value(message), from_cache=True)
    await publish(whole)
    _collect(whole)
    return True
