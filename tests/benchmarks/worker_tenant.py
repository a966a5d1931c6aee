"""The tenant App of bench_tenant_workers (importable as tests.benchmarks.worker_tenant)."""

from __future__ import annotations

from agent_runtime.sdk import App

app = App("worker-bench")


@app.tool
async def noop(x: int) -> dict[str, int]:
    """Does nothing: what is measured is the call's way to the body and back."""
    return {"x": x}


@app.tool
def noop_sync(x: int) -> dict[str, int]:
    """The same body, sync (it runs in a worker thread, in or out of the worker process)."""
    return {"x": x}
