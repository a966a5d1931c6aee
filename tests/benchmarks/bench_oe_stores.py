"""The OE on each of its stores in one run (issue 35): SQLite, PostgreSQL, and MongoDB through FerretDB v1 on
the same PostgreSQL.

Real processes on loopback (bench_oe's stack: a Tool Pod with a no-I/O tool, an AER whose runs only wait,
the OE), Debian's PostgreSQL in a temp dir. For each store, against the Tool Pod called directly in the same
run: the step's added latency p50/p99, a replay hit's p50, and steps/s with 32 executions stepping at once.
Then SQLite and PostgreSQL holding 100,000 stored executions (1,000 of them suspended): the first page of
the list, a page deep into it (a cursor), an agent-filtered page and the reviews page, p50/p99 over 50
requests each (target < 50 ms), and the OE's peak RSS after them.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
import time
from pathlib import Path

import httpx

from agent_runtime.oe.store import AuditRecord, EventRecord, ExecutionRecord, PostgresStore, SqliteStore
from agent_runtime.protocol import ExecutionState
from tests.benchmarks.bench_oe import (
    AGENT,
    CLIENT_TOKEN,
    CONCURRENT_EXECUTIONS,
    Stack,
    _latency,
    _ms,
    _peak_rss_mb,
    _run_value,
    _throughput,
)
from tests.benchmarks.bench_toolpod import _percentile, _run

STORED = 100_000
SUSPENDED_EVERY = 100  # 1,000 of them wait for a review
PAGE_REQUESTS = 50
PG_THROUGHPUT_TARGET = 1000


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stored_records(count: int) -> list[tuple[ExecutionRecord, list[AuditRecord], list[EventRecord]]]:
    now = time.time() - count
    out = []
    for n in range(count):
        eid = f"stored-{n:06d}"
        suspended = n % SUSPENDED_EVERY == 0
        record = ExecutionRecord(
            execution_id=eid,
            agent=AGENT if n % 2 else "bench/other",
            project_id="bench",
            workspace_id="bench.agent",
            session_id=eid,
            input={"n": n, "question": "what is the status of order 123?"},
            status=ExecutionState.SUSPENDED if suspended else ExecutionState.COMPLETED,
            result=None if suspended else {"answer": f"order {n} shipped"},
            suspension={"reason": "approval", "tool": "refund", "args": {"n": n}} if suspended else None,
            created_at=now + n,
            updated_at=now + n,
            finished_at=None if suspended else now + n,
            step_count=3,
            runs=1,
        )
        audit = [
            AuditRecord(
                execution_id=eid,
                step=step,
                agent=record.agent,
                workspace_id="bench.agent",
                kind="tool",
                tool="noop",
                args={"item_id": str(step)},
                decision="allow",
                route="tool_pod",
                status="success",
                duration_ms=1.0,
                at=now + n,
            )
            for step in (1, 2, 3)
        ]
        events = [
            EventRecord(execution_id=eid, seq=seq, type=kind, step=None, data={}, at=now + n)
            for seq, kind in enumerate(
                ("created", "running", "step_finished", "step_finished", "completed"), 1
            )
        ]
        out.append((record, audit, events))
    return out


def _fill_sqlite(
    path: Path, rows: list[tuple[ExecutionRecord, list[AuditRecord], list[EventRecord]]]
) -> None:
    async def schema() -> None:
        store = SqliteStore(path)
        await store.open()
        await store.close()

    asyncio.run(schema())
    conn = sqlite3.connect(path)
    with conn:
        conn.executemany(
            "INSERT INTO executions (execution_id, agent, status, created_at, record) VALUES (?, ?, ?, ?, ?)",
            [
                (r.execution_id, r.agent, r.status.value, r.created_at, r.model_dump_json())
                for r, _, _ in rows
            ],
        )
        conn.executemany(
            "INSERT INTO audit (execution_id, record) VALUES (?, ?)",
            [(a.execution_id, a.model_dump_json()) for _, audit, _ in rows for a in audit],
        )
        conn.executemany(
            "INSERT INTO events (execution_id, seq, record) VALUES (?, ?, ?)",
            [(e.execution_id, e.seq, e.model_dump_json()) for _, _, events in rows for e in events],
        )
    conn.close()


def _fill_postgres(
    dsn: str, rows: list[tuple[ExecutionRecord, list[AuditRecord], list[EventRecord]]]
) -> None:
    import asyncpg

    from agent_runtime.oe.store.postgres import _fields_json

    async def fill() -> None:
        store = PostgresStore(dsn)
        await store.open()  # the schema, by the store's own migrations
        await store.close()
        conn = await asyncpg.connect(dsn)
        try:
            await conn.copy_records_to_table(
                "executions",
                columns=["execution_id", "agent", "project_id", "status", "created_at", "fields"],
                records=[
                    (r.execution_id, r.agent, r.project_id, r.status.value, r.created_at, _fields_json(r))
                    for r, _, _ in rows
                ],
            )
            await conn.copy_records_to_table(
                "audit",
                columns=["execution_id", "record"],
                records=[(a.execution_id, a.model_dump_json()) for _, audit, _ in rows for a in audit],
            )
            await conn.copy_records_to_table(
                "events",
                columns=["execution_id", "seq", "record"],
                records=[
                    (e.execution_id, e.seq, e.model_copy(update={"seq": 0}).model_dump_json())
                    for _, _, events in rows
                    for e in events
                ],
            )
            await conn.copy_records_to_table(
                "event_seqs",
                columns=["execution_id", "seq"],
                records=[(r.execution_id, 5) for r, _, _ in rows],
            )
            await conn.execute("ANALYZE")
        finally:
            await conn.close()

    asyncio.run(fill())


async def _pages(oe_port: int) -> dict[str, list[float]]:
    """p50/p99 of the list's first page, a deep page, an agent's page and the reviews page."""
    headers = {"authorization": f"Bearer {CLIENT_TOKEN}"}
    timings: dict[str, list[float]] = {"first": [], "deep": [], "agent": [], "reviews": []}
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{oe_port}", headers=headers, timeout=60
    ) as client:
        # A cursor 40,000 executions in: follow the pages there once.
        cursor = None
        for _ in range(200):
            page = (
                await client.get(
                    "/executions", params={"limit": "200", **({"cursor": cursor} if cursor else {})}
                )
            ).json()
            cursor = page["next_cursor"]
        requests = {
            "first": ("/executions", {"limit": "50"}),
            "deep": ("/executions", {"limit": "50", "cursor": cursor}),
            "agent": ("/executions", {"limit": "50", "agent": AGENT}),
            "reviews": ("/api/v1/projects/bench/reviews", {"limit": "50"}),
        }
        for _ in range(PAGE_REQUESTS + 5):
            for name, (path, params) in requests.items():
                started = time.perf_counter()
                response = await client.get(path, params=params)
                elapsed = time.perf_counter() - started
                if response.status_code != 200 or len(response.json()["items"]) != 50:
                    raise RuntimeError(f"{path} {params}: {response.status_code} {response.text[:300]}")
                timings[name].append(elapsed)
    return {name: values[5:] for name, values in timings.items()}


def _pages_of(oe_port: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {}

    async def measure() -> None:
        timings.update(await _pages(oe_port))

    _run(measure())
    return timings


def _print_pages(label: str, timings: dict[str, list[float]]) -> None:
    for name, values in timings.items():
        print(
            f"  {label:10s} {name:8s} page of 50   p50 {_ms(_percentile(values, 0.5))}  "
            f"p99 {_ms(_percentile(values, 0.99))}   (target < 50 ms)"
        )


def main() -> None:
    from tests.integration.ferretdb import running_ferretdb
    from tests.integration.postgres import running_postgres

    print("load average before: {:.2f} {:.2f} {:.2f} (2 cores shared)".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory(prefix="bench-oe-stores-") as tmp, running_postgres() as pg:
        stack = Stack(Path(tmp))
        try:
            stack.start_runtimes()
            stores = {
                "SQLite": {"OE_SQLITE_PATH": str(Path(tmp) / "oe.sqlite3")},
                "PostgreSQL": {"OE_STORE_TYPE": "postgres", "OE_POSTGRES_URL": pg.new_database()},
            }
            rates: dict[str, float] = {}
            cpu: dict[str, float] = {}  # the OE's own CPU seconds per step, from /proc (not wall time)
            with running_ferretdb(postgresql_url=pg.new_database()) as uri:
                stores["FerretDB/PostgreSQL"] = {
                    "OE_STORE_TYPE": "mongodb",
                    "OE_MONGODB_URI": uri,
                    "OE_MONGODB_DATABASE": "bench_oe",
                }
                for label, env in stores.items():
                    print(f"--- {label}")
                    oe, port = stack.start_oe(env)
                    _run(_latency(port, stack.tool_port))
                    before, started = _cpu_s(oe.pid), time.perf_counter()
                    rates[label] = _run_value(_throughput(port, label))
                    steps = rates[label] * (time.perf_counter() - started)
                    cpu[label] = (_cpu_s(oe.pid) - before) / max(steps, 1)
                    stack.stop(oe)
            print(f"steps/s with {CONCURRENT_EXECUTIONS} concurrent executions, same run:")
            for label, rate in rates.items():
                print(
                    f"  {label:22s} {rate:7.0f} steps/s   {rate / rates['SQLite']:.2f}x SQLite   "
                    f"OE CPU per step {cpu[label] * 1000:.3f} ms"
                )
            print(
                f"  target: PostgreSQL >= {PG_THROUGHPUT_TARGET} steps/s (measured {rates['PostgreSQL']:.0f})"
            )

            started = time.perf_counter()
            rows = _stored_records(STORED)
            big_sqlite = Path(tmp) / "big.sqlite3"
            _fill_sqlite(big_sqlite, rows)
            big_pg = pg.new_database()
            _fill_postgres(big_pg, rows)
            del rows
            print(
                f"stored {STORED:,} executions in each of SQLite and PostgreSQL "
                f"in {time.perf_counter() - started:.1f} s"
            )
            for label, env in (
                ("SQLite", {"OE_SQLITE_PATH": str(big_sqlite)}),
                ("PostgreSQL", {"OE_STORE_TYPE": "postgres", "OE_POSTGRES_URL": big_pg}),
            ):
                oe, port = stack.start_oe(env)
                timings = _pages_of(port)
                _print_pages(label, timings)
                print(
                    f"  {label:10s} OE peak RSS with {STORED:,} stored executions: "
                    f"{_peak_rss_mb(oe.pid):.0f} MB"
                )
                stack.stop(oe)
        finally:
            stack.stop()
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
