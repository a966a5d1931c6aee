"""A tenant App for bench_drain: a cooperative tool that parks until cancelled, and one that returns."""

from __future__ import annotations

import asyncio

from agent_runtime.sdk import App

app = App("bench-drain-tenant")


@app.tool(timeout_s=3600)
async def park(tag: str) -> dict[str, str]:
    """Wait (cooperatively) until a drain or an interrupt cancels it."""
    await asyncio.sleep(3600)
    return {"tag": tag}


@app.tool
async def noop(tag: str) -> dict[str, str]:
    """Return at once."""
    return {"tag": tag}
