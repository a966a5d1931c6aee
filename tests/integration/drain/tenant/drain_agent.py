"""The tenant App the drain and interrupt/call tests run in a real AER and Tool Pod (`drain_agent`).

Each kind of work exists twice: `aer_*` tools are local (their bodies run in the AER, tracked there) and
`pod_*` tools are remote (they run in the Tool Pod). Every body first touches its `marker` file, so a test
knows it started (or that it never did); a held body then waits for its `release` file:

- `*_quick`: returns at once;
- `*_hold_async`: cooperative, `await`s until released (a drain or an interrupt can cancel it); touches
  `<marker>.ended` when it stops, however it stops;
- `*_hold_sync`: a sync body in a worker thread, polling the file (nothing can signal it).

The entrypoint runs `input.plan`: groups of calls, one group after another, the calls of a group together.
A call's failure is recorded and the run goes on, so later steps still happen.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from agent_runtime.sdk import App, RequestContext

app = App("drain-agent")
HOLD_LIMIT_S = 60.0


def _touch(path: str) -> None:
    Path(path).touch()


def _exists(path: str) -> bool:
    return Path(path).exists()  # a stat of a local temp file: cheap enough for a test's loop


async def _hold_async(marker: str, release: str) -> dict[str, Any]:
    _touch(marker)
    try:
        deadline = time.monotonic() + HOLD_LIMIT_S
        while not _exists(release):
            if time.monotonic() > deadline:
                raise TimeoutError(release)
            await asyncio.sleep(0.01)
        return {"released": True}
    finally:
        _touch(marker + ".ended")  # cancelled or not: a test can tell the body is no longer running


def _hold_sync(marker: str, release: str) -> dict[str, Any]:
    _touch(marker)
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not Path(release).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(release)
        time.sleep(0.01)
    return {"released": True}


@app.tool(is_local=True)
async def aer_quick(marker: str) -> dict[str, Any]:
    """Return at once (runs in the AER)."""
    _touch(marker)
    return {"ok": True}


@app.tool(is_local=True, timeout_s=HOLD_LIMIT_S + 5)
async def aer_hold_async(marker: str, release: str) -> dict[str, Any]:
    """Wait cooperatively for the release file (runs in the AER)."""
    return await _hold_async(marker, release)


@app.tool(is_local=True, timeout_s=HOLD_LIMIT_S + 5)
def aer_hold_sync(marker: str, release: str) -> dict[str, Any]:
    """Block a worker thread until the release file exists (runs in the AER)."""
    return _hold_sync(marker, release)


@app.tool
async def pod_quick(marker: str) -> dict[str, Any]:
    """Return at once (runs in the Tool Pod)."""
    _touch(marker)
    return {"ok": True}


@app.tool(timeout_s=HOLD_LIMIT_S + 5)
async def pod_hold_async(marker: str, release: str) -> dict[str, Any]:
    """Wait cooperatively for the release file (runs in the Tool Pod)."""
    return await _hold_async(marker, release)


@app.tool(timeout_s=HOLD_LIMIT_S + 5)
def pod_hold_sync(marker: str, release: str) -> dict[str, Any]:
    """Block a worker thread until the release file exists (runs in the Tool Pod)."""
    return _hold_sync(marker, release)


@app.entrypoint
def build(ctx: RequestContext) -> Any:
    async def run(task: dict[str, Any]) -> Any:
        results: list[Any] = []
        for group in task.get("plan", []):
            # Started in list order, so their steps are numbered in that order (Decision 4).
            calls = [app.call_tool(call["tool"], call["args"]) for call in group]
            for outcome in await asyncio.gather(*calls, return_exceptions=True):
                if isinstance(outcome, Exception):
                    results.append({"error": type(outcome).__name__, "text": str(outcome)})
                elif isinstance(outcome, BaseException):
                    raise outcome
                else:
                    results.append(outcome)
        return {"results": results}

    return run
