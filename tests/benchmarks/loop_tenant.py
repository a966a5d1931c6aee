"""A tenant App for bench_loop: each run makes model and tool calls in turn and reports how long each took."""

from __future__ import annotations

import os
import time
from typing import Any

from agent_runtime.llm import ChatCompletionsModel
from agent_runtime.sdk import App, RequestContext

app = App("bench-loop-tenant")


@app.tool
async def noop(item_id: str) -> dict[str, str]:
    """Return the argument unchanged."""
    return {"item_id": item_id}


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    llm = app.llm(ChatCompletionsModel.from_env(os.environ), llm_id="main")

    async def run(task: dict[str, Any]) -> dict[str, Any]:
        timings: list[tuple[str, float]] = []
        for pair in range(int(task.get("pairs", 5))):
            started = time.perf_counter()
            await llm.ainvoke([{"type": "human", "content": f"step {pair}"}])
            timings.append(("llm", time.perf_counter() - started))
            started = time.perf_counter()
            await app.call_tool("noop", {"item_id": str(pair)})
            timings.append(("tool", time.perf_counter() - started))
        return {"timings": timings}

    return run
