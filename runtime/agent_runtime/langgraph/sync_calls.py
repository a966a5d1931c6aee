"""Sync nodes and sync graphs: a governed call made from a worker thread runs on the run's event loop.

LangGraph runs a plain `def` node (and a sync tool) in a worker thread, with the run's context variables
copied. The OE client lives on the AER's event loop, so a governed model's `invoke` or a governed tool's
`run` made there hands its coroutine to that loop and waits for it in the thread; the coroutine runs
with the thread's context (asyncio copies it), so the step ledger, the LangGraph task and the run state
are the ones of the node that made the call. On the loop's own thread a blocking wait would deadlock:
that is an error saying to use `ainvoke`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class SyncCallError(RuntimeError):
    """A sync governed call where it cannot be made (outside a platform run, or on the event loop)."""


def run_from_worker_thread(
    start: Callable[[], Coroutine[Any, Any, T]], *, loop: asyncio.AbstractEventLoop | None, what: str
) -> T:
    """Run `start()` on `loop` and wait for it here, a thread other than the loop's."""
    if loop is None or loop.is_closed():
        raise SyncCallError(
            f"{what} outside a platform run of the graph: governed calls are made only while the AER runs it"
        )
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None:
        raise SyncCallError(
            f"{what} blocks, and this code runs on the event loop: in an `async def` node call ainvoke "
            "(a plain `def` node may call invoke; LangGraph runs it in a worker thread)"
        )
    return asyncio.run_coroutine_threadsafe(start(), loop).result()
