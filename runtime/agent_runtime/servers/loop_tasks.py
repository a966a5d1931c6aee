"""The event loop's live task count as a gauge: what a soak watches for tasks that pile up (issue 41)."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, Gauge


def register_loop_tasks(registry: CollectorRegistry, *, name: str) -> None:
    Gauge(name, "Asyncio tasks alive in this process's event loop.", registry=registry).set_function(
        _live_tasks
    )


def _live_tasks() -> float:
    try:
        return float(len(asyncio.all_tasks()))
    except RuntimeError:  # scraped off the loop's thread: there is no count to give
        return float("nan")
