"""What a step's one transaction costs on PostgreSQL (issue 35): the OE's writes for a step that ran
(finish_step, the suspension it holds, its audit record with the chain's head) as separate calls, each its
own transaction (the baseline: how they were written before), against the same calls inside
`PostgresStore.atomic()`; interleaved rounds on one real PostgreSQL in the same run, 16 steps at once.

Prints the per-step p50 and p99 of each, their ratio, and steps/s.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from agent_runtime.oe.store import AuditRecord, ExecutionRecord, PostgresStore, StepRecord
from agent_runtime.protocol import CallOutcome
from tests.benchmarks.bench_toolpod import _percentile
from tests.integration.postgres import running_postgres

ROUNDS = 6
STEPS_PER_ROUND = 400
CONCURRENT = 16
T0 = 1_760_000_000.0


@contextlib.asynccontextmanager
async def _separate() -> AsyncIterator[None]:
    yield


async def _step(store: PostgresStore, execution_id: str, number: int, *, block: Callable[[], Any]) -> float:
    await store.claim_step(
        StepRecord(
            execution_id=execution_id,
            step=number,
            tool="echo",
            fingerprint=f"sha256:{number}",
            owner="bench",
            created_at=T0,
            updated_at=T0,
        )
    )
    started = time.perf_counter()
    async with block():
        await store.finish_step(
            execution_id, number, CallOutcome(status="success", result={"n": number}), at=T0
        )
        await store.update_execution(execution_id, {"updated_at": T0 + number})
        stored = await store.append_audit(
            AuditRecord(
                execution_id=execution_id,
                step=number,
                agent="team-a/bench",
                workspace_id="team-a.bench",
                kind="tool",
                tool="echo",
                decision="allow",
                at=T0,
            )
        )
        assert stored.seq is not None and stored.hash is not None
        await store.set_audit_head(
            execution_id, {"execution_id": execution_id, "seq": stored.seq, "hash": stored.hash}
        )
    return time.perf_counter() - started


async def _round(
    store: PostgresStore, label: str, round_no: int, block: Callable[[], Any]
) -> tuple[list[float], float]:
    ids = [f"{label}-{round_no}-{lane}" for lane in range(CONCURRENT)]
    for execution_id in ids:
        await store.create_execution(
            ExecutionRecord(
                execution_id=execution_id,
                agent="team-a/bench",
                project_id="team-a",
                workspace_id="team-a.bench",
                session_id=f"s-{execution_id}",
                created_at=T0,
                updated_at=T0,
            )
        )
    per_lane = STEPS_PER_ROUND // CONCURRENT

    async def lane(execution_id: str) -> list[float]:
        return [await _step(store, execution_id, n, block=block) for n in range(1, per_lane + 1)]

    started = time.perf_counter()
    timings = [t for lane_timings in await asyncio.gather(*(lane(i) for i in ids)) for t in lane_timings]
    return timings, len(timings) / (time.perf_counter() - started)


async def _bench(dsn: str) -> None:
    store = PostgresStore(dsn, pool_size=CONCURRENT + 2)
    await store.open()
    variants: dict[str, Callable[[], Any]] = {"separate calls": _separate, "one transaction": store.atomic}
    timings: dict[str, list[float]] = {name: [] for name in variants}
    rates: dict[str, list[float]] = {name: [] for name in variants}
    try:
        await _round(store, "warm", 0, store.atomic)
        for round_no in range(ROUNDS):
            order = list(variants) if round_no % 2 == 0 else list(reversed(variants))
            for name in order:
                found, rate = await _round(store, name.replace(" ", "_"), round_no, variants[name])
                timings[name].extend(found)
                rates[name].append(rate)
    finally:
        await store.close()
    print(f"a step's writes on PostgreSQL, {CONCURRENT} at once, {ROUNDS} interleaved rounds, same run:")
    base = statistics.median(timings["separate calls"])
    for name in variants:
        p50, p99 = statistics.median(timings[name]), _percentile(timings[name], 0.99)
        print(
            f"  {name:16s} p50 {p50 * 1000:6.2f} ms  p99 {p99 * 1000:6.2f} ms  "
            f"{statistics.median(rates[name]):6.0f} steps/s  p50 ratio {p50 / base:.2f}"
        )


def main() -> None:
    with running_postgres() as server:
        asyncio.run(_bench(server.new_database()))


if __name__ == "__main__":
    main()
