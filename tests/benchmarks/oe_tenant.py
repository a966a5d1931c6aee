"""A tenant App for bench_oe: a Tool Pod tool that does no I/O, and runs that only wait."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_runtime.sdk import App

app = App("bench-oe-tenant")


@app.tool
async def noop(item_id: str) -> dict[str, str]:
    """Return the argument unchanged."""
    return {"item_id": item_id}


@app.entrypoint
async def run(task: dict[str, Any]) -> dict[str, Any]:
    """Hold the execution open while the benchmark plays the AER's part on the OE."""
    await asyncio.sleep(float(task.get("hold_s", 60)))
    return {"held": True}
