"""LangGraph stream modes through the platform (issue 32): run the graph with `astream` and send each chunk
of the modes the client asked for (`stream_mode` on /invoke) to the OE, which publishes it as an event of
that mode's name.

The graph always streams `updates` and `values` too, as LangGraph's own `ainvoke` does, so the run's result
(the last `values` chunk, with the interrupts the `updates` carried) is exactly what `ainvoke` returns; only
the modes asked for are sent. A chunk is JSON before it leaves: messages as platform dicts, a `messages`
chunk as `[message, metadata]`. A chunk the OE refuses (the execution was cancelled, say) ends the
streaming, not the run: the client's stream is a view of the run, never a reason for it to fail."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from agent_runtime.protocol import GraphStreamChunk
from agent_runtime.sdk.errors import PlatformFailure

logger = logging.getLogger(__name__)

# LangGraph's marker of the interrupts a run stopped at, in its `updates` and its result.
INTERRUPT_KEY = "__interrupt__"
# What ainvoke itself streams to build its result (LangGraph's v1 `ainvoke`).
_RESULT_MODES = ("updates", "values")

Send = Callable[[GraphStreamChunk], Awaitable[None]]
Jsonable = Callable[[Any], Any]


def astream_modes(asked: Sequence[str]) -> list[str]:
    """The modes to run `astream` with: the asked ones, and what the result is built from."""
    return list(dict.fromkeys([*_RESULT_MODES, *asked]))


def chunk_json(mode: str, payload: Any, *, jsonable: Jsonable) -> Any:
    """One chunk as JSON; a `messages` chunk is `(message, metadata)`."""
    if mode == "messages" and isinstance(payload, tuple) and len(payload) == 2:
        message, metadata = payload
        return [jsonable(message), jsonable(metadata)]
    return jsonable(payload)


async def streamed_result(
    graph: Any,
    graph_input: Any,
    config: dict[str, Any],
    *,
    execution_id: str,
    asked: Sequence[str],
    send: Send,
    jsonable: Jsonable,
) -> Any:
    """`graph.ainvoke(graph_input, config)`'s result, with each chunk of the `asked` modes sent on."""
    latest: Any = None
    interrupts: list[Any] = []
    sending = True
    async for mode, payload in graph.astream(graph_input, config, stream_mode=astream_modes(asked)):
        if mode == "values":
            latest = payload
        elif mode == "updates" and isinstance(payload, Mapping) and payload.get(INTERRUPT_KEY) is not None:
            interrupts.extend(payload[INTERRUPT_KEY])
        if sending and mode in asked:
            chunk = GraphStreamChunk(
                execution_id=execution_id, mode=mode, data=chunk_json(mode, payload, jsonable=jsonable)
            )
            try:
                await send(chunk)
            except PlatformFailure as exc:
                logger.warning("stream modes of execution %s stopped: %s", execution_id, exc.message)
                sending = False
    if interrupts:
        return {**(latest if isinstance(latest, dict) else {}), INTERRUPT_KEY: interrupts}
    return latest
