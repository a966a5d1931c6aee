"""`POST /invoke_llm` streamed: with `stream: true` and `Accept: application/x-ndjson`, the Tool Pod
answers one JSON line per delta (`{"delta": LLMDelta}`) as the model's chunks arrive, then one line with
the call's outcome (`{"outcome": CallOutcome}`), the same outcome the whole answer would carry.

The call runs in a task of its own, under the Tool Pod's memory of recent calls: an OE that goes away
mid-stream does not stop it (a re-driven call gets its outcome from that memory, without deltas), and
only a drain or an interrupt of the execution does (which closes the request to the provider).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from starlette.responses import StreamingResponse

from agent_runtime.logging_config import log_context
from agent_runtime.protocol import INVOKE_LLM_PATH, CallOutcome, InvokeLLMRequest, LLMDelta
from agent_runtime.servers.llm_calls import LLMCallService
from agent_runtime.servers.model_spans import traced_model_call
from agent_runtime.servers.recent_calls import RecentCalls

NDJSON = "application/x-ndjson"

_delta_json = LLMDelta.__pydantic_serializer__.to_json
_outcome_json = CallOutcome.__pydantic_serializer__.to_json
# Calls whose stream reader went away: kept referenced until they finish.
_running: set[asyncio.Task[None]] = set()


def streamed_llm_call(
    service: LLMCallService, call: InvokeLLMRequest, *, body: bytes, recent: RecentCalls
) -> StreamingResponse:
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()

    def on_delta(delta: LLMDelta) -> None:
        lines.put_nowait(b'{"delta":' + _delta_json(delta) + b"}\n")

    async def produce() -> None:
        try:
            with log_context(execution_id=call.execution_id, step=call.step):
                outcome = await recent.once(
                    route=INVOKE_LLM_PATH,
                    execution_id=call.execution_id,
                    step=call.step,
                    body=body,
                    # The same model span as a whole answer's: the stream's usage chunk sets its tokens.
                    run=lambda: traced_model_call(call, lambda: service.invoke(call, on_delta=on_delta)),
                )
            lines.put_nowait(b'{"outcome":' + _outcome_json(outcome) + b"}\n")
        finally:
            lines.put_nowait(None)

    task = asyncio.get_running_loop().create_task(produce())
    _running.add(task)
    task.add_done_callback(_running.discard)

    async def stream() -> AsyncIterator[bytes]:
        while True:
            line = await lines.get()
            if line is None:
                return
            yield line

    return StreamingResponse(stream(), media_type=NDJSON, headers={"cache-control": "no-cache"})
