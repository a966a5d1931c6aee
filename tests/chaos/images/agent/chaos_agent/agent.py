"""The chaos tier's tenant App: `allocate` needs as much memory as it is asked for, in its Tool Pod worker.

A run makes exactly the calls its input lists (`{"calls": [[tool, args], ...]}`), no model in between, so a
test knows every step: a tool that fails is reported in the result by its category and the run goes on, as
a model would be told and go on.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from agent_runtime.sdk import App, RequestContext, ToolExecutionError

app = App("chaos-agent")

CHUNK = 16 * 2**20
PAGE = 4096


@app.tool(timeout_s=120)
def allocate(mebibytes: Annotated[int, Field(ge=1, le=65_536)]) -> dict[str, int]:
    """Hold `mebibytes` MiB, every page written (so it is resident, not just reserved), then let go."""
    held = []
    for _ in range(max(1, mebibytes * 2**20 // CHUNK)):
        chunk = bytearray(CHUNK)
        chunk[::PAGE] = b"\x01" * (CHUNK // PAGE)
        held.append(chunk)
    return {"allocated_mib": len(held) * CHUNK // 2**20}


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    async def run(task: dict[str, Any]) -> dict[str, Any]:
        results: list[Any] = []
        for name, args in task["calls"]:
            try:
                results.append(await app.call_tool(name, args))
            except ToolExecutionError as exc:
                results.append({"error": exc.error.category, "explanation": exc.error.explanation})
        return {"results": results}

    return run
