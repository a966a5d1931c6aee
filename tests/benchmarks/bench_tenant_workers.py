"""What running tenant tool bodies in worker processes (issue 36) adds per call.

Baseline, in the same run: the body called in this process as the Tool Pod did before (bind + acall).
Measured: the same call through TenantWorkers (a frame to the worker over its socket, the body there, the
answer back). Prints p50/p99 of each and the added p50 per call, sequential and with 32 concurrent callers.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from agent_runtime.sdk import load_app
from agent_runtime.servers.tenant_workers import TenantWorkers

ENTRYPOINT = "tests.benchmarks.worker_tenant:app"
CALLS = 2000
CONCURRENT = 32


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _timed(run: Callable[[int], Awaitable[Any]], calls: int) -> list[float]:
    samples = []
    for i in range(calls):
        started = time.perf_counter()
        await run(i)
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


async def _concurrent(run: Callable[[int], Awaitable[Any]], calls: int) -> float:
    started = time.perf_counter()
    counter = iter(range(calls))

    async def caller() -> None:
        for i in counter:
            await run(i)

    await asyncio.gather(*(caller() for _ in range(CONCURRENT)))
    return calls / (time.perf_counter() - started)


async def _main() -> None:
    app = load_app(ENTRYPOINT)
    workers = TenantWorkers(
        entrypoint=ENTRYPOINT, tools=list(app.tools.values()), secret_env={}, environ=os.environ
    )
    await workers.start()
    try:
        for name in ("noop", "noop_sync"):
            spec = app.tools[name]

            async def in_process(i: int, spec: Any = spec) -> Any:
                return await spec.acall(spec.bind({"x": i}))

            async def in_worker(i: int, spec: Any = spec) -> Any:
                reply = await workers.call(spec, {"x": i}, {"execution_id": "bench", "step": i + 1})
                assert reply.status == "ok", reply
                return reply.fields["result"]

            await _timed(in_process, 200)
            await _timed(in_worker, 200)  # warm-up
            # Interleaved rounds, so a busy moment of the shared machine lands on both alike.
            base: list[float] = []
            worker: list[float] = []
            for _ in range(4):
                base += await _timed(in_process, CALLS // 4)
                worker += await _timed(in_worker, CALLS // 4)
            base_rate = await _concurrent(in_process, CALLS)
            worker_rate = await _concurrent(in_worker, CALLS)
            added = statistics.median(worker) - statistics.median(base)
            print(
                f"{name}: in-process p50 {_pct(base, 0.5):.0f} us p99 {_pct(base, 0.99):.0f} us; "
                f"worker p50 {_pct(worker, 0.5):.0f} us p99 {_pct(worker, 0.99):.0f} us; "
                f"added p50 {added:.0f} us per call; "
                f"{CONCURRENT} concurrent: {base_rate:.0f} vs {worker_rate:.0f} calls/s "
                f"(ratio {worker_rate / base_rate:.2f})",
                flush=True,
            )
    finally:
        await workers.aclose()


def main() -> None:
    asyncio.run(_main())


if __name__ == "__main__":
    main()
