"""A tenant App for bench_toolpod: one Tool Pod tool that does no I/O, to time the Tool Pod's own path."""

from __future__ import annotations

from agent_runtime.sdk import App

app = App("bench-tenant")


@app.tool
async def noop(item_id: str) -> dict[str, str]:
    """Return the argument unchanged."""
    return {"item_id": item_id}
