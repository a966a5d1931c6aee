"""How a suspension the OE asks for surfaces inside a LangGraph graph: LangGraph's own `interrupt()`.

The SDK signals a suspension with `SuspendRequested` (a BaseException). Inside a task of a graph run with a
checkpointer, the governed model and tools turn it into `interrupt(...)`: LangGraph then saves the
checkpoint with the interrupted task pending (CP-06) and the resumed run re-runs exactly that task. Outside
a graph, or in a graph without a checkpointer (which cannot resume), the signal propagates as it is and
the resume re-runs the turn from the start against the OE's replay cache.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import NoReturn

from langgraph.types import interrupt

from agent_runtime.langgraph.steps import StepLedger, current_task_id
from agent_runtime.sdk.errors import SuspendRequested


@dataclass
class GraphRun:
    """One run of a compiled graph by the platform: its step ledger and whether it can resume."""

    ledger: StepLedger
    checkpointed: bool
    # The AER's event loop: a sync node's governed call runs there (sync_calls.py).
    loop: asyncio.AbstractEventLoop | None = None


_graph_run: ContextVar[GraphRun | None] = ContextVar("agent_runtime_graph_run", default=None)


@contextlib.contextmanager
def graph_run_scope(run: GraphRun) -> Iterator[GraphRun]:
    token = _graph_run.set(run)
    try:
        yield run
    finally:
        _graph_run.reset(token)


def current_graph_run() -> GraphRun | None:
    return _graph_run.get()


def surface_suspension(signal: SuspendRequested) -> NoReturn:
    """Raise the suspension the way the surrounding code can carry it to the AER's runner."""
    run = _graph_run.get()
    if run is not None and run.checkpointed and current_task_id() is not None:
        interrupt(signal.metadata())
        # interrupt() returns only when a resume value was given; the platform never gives one (the OE,
        # not LangGraph, answers the held call), so getting here means another resume path: keep waiting.
    raise signal
