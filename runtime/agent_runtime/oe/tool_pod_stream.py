"""Reading a streamed `/invoke_llm` answer: NDJSON lines `{"delta": LLMDelta}` ..., then `{"outcome": ...}`.

The line format is the Tool Pod's (`servers/llm_stream_route.py`). A stream that ends without its outcome
line is a Tool Pod that went away while the call ran (the caller reports it so, never retries it).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from agent_runtime.protocol import CallOutcome, LLMDelta

NDJSON = "application/x-ndjson"
# One line holds one delta or the whole outcome (a final message is capped by the Tool Pod's body cap).
MAX_LINE_BYTES = 16 * 1024 * 1024

# Takes the deltas that arrived together (one read of the stream), in order.
DeltaHandler = Callable[[list[LLMDelta]], Awaitable[None]]


class StreamBroken(Exception):
    """The Tool Pod's stream ended, or said something, that is not a delta or an outcome."""


def parse_line(line: bytes) -> LLMDelta | CallOutcome:
    """One line of the stream as what it carries; StreamBroken for anything else."""
    try:
        item: Any = json.loads(line)
    except ValueError:
        raise StreamBroken("a line of the Tool Pod's stream is not JSON") from None
    try:
        if isinstance(item, dict) and "delta" in item:
            return LLMDelta.model_validate(item["delta"])
        if isinstance(item, dict) and "outcome" in item:
            return CallOutcome.model_validate(item["outcome"])
    except ValidationError:
        raise StreamBroken("a line of the Tool Pod's stream has the wrong shape") from None
    raise StreamBroken("a line of the Tool Pod's stream is neither a delta nor an outcome")


async def read_streamed_outcome(pieces: AsyncIterable[bytes], *, on_delta: DeltaHandler) -> CallOutcome:
    """Hand each delta on as it comes; the outcome at the end. Raises StreamBroken (a ValueError kin).

    `pieces`: the body as it arrives, cut anywhere (aiohttp's `iter_any`)."""
    buffer = b""
    async for piece in pieces:
        buffer += piece
        if len(buffer) > MAX_LINE_BYTES:
            raise StreamBroken("a line of the Tool Pod's stream is too long")
        *lines, buffer = buffer.split(b"\n")
        together: list[LLMDelta] = []
        for line in lines:
            if not line.strip():
                continue
            item = parse_line(line)
            if isinstance(item, CallOutcome):
                if together:
                    await on_delta(together)
                return item
            together.append(item)
        if together:
            await on_delta(together)
    raise StreamBroken("the Tool Pod's stream ended before the call's outcome")
