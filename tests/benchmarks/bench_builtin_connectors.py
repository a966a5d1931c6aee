"""Built-in connectors: `postgres.query` against the same query through asyncpg directly, and the SQL guard.

A private PostgreSQL (Debian's package, tests/peers/servers.py) holds a 1,000-row table. The direct
baseline does what the connector's read does, minus the connector: one pooled connection, a READ ONLY
transaction, a prepared statement, a cursor fetching `limit + 1` rows and a rollback. The connector adds
argument checking against the tool's schema, the guard (PostgreSQL's parser), a second prepare of the
statement wrapped so the server cuts long cells, DISCARD ALL on release, the JSON-shaped result and its
error mapping.
Calls alternate in blocks so drift on a shared machine hits both alike. Then the guard's own cost per
statement for short, typical and long statements, both dialects, each round a distinct text (the MySQL
guard keeps verdicts per exact text; that is measured apart), and MySQL's parser alone as the baseline.
Figures are printed, never asserted.
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from agent_runtime.connectors.builtin._mysql_readonly import parse_read as parse_mysql
from agent_runtime.connectors.builtin._sqlguard import check_read
from agent_runtime.connectors.builtin.postgres import PostgresConnector
from tests.peers.servers import postgres_server

CALLS = 2000
BLOCK = 100
WARMUP = 200
QUERY = "SELECT id, name, price FROM bench_items WHERE id > $1 ORDER BY id"
LIMIT = 10


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def _interleaved(
    a: Callable[[], Awaitable[Any]], b: Callable[[], Awaitable[Any]]
) -> tuple[list[float], list[float]]:
    timer = time.perf_counter
    samples_a: list[float] = []
    samples_b: list[float] = []
    for _ in range(WARMUP):
        await a()
        await b()
    for _ in range(CALLS // BLOCK):
        for call, samples in ((a, samples_a), (b, samples_b)):
            for _ in range(BLOCK):
                started = timer()
                await call()
                samples.append(timer() - started)
    return samples_a, samples_b


async def _bench_query(server: Any) -> None:
    admin = await asyncpg.connect(**server.admin)
    try:
        await admin.execute("CREATE TABLE bench_items (id int PRIMARY KEY, name text, price numeric(10,2))")
        await admin.execute(
            "INSERT INTO bench_items SELECT g, 'item ' || g, g * 1.5 FROM generate_series(1, 1000) g"
        )
        await admin.execute(f"ALTER TABLE bench_items OWNER TO {server.user}")
    finally:
        await admin.close()
    env = {"BENCH_DB_PASSWORD": server.password}
    connector = PostgresConnector(
        {"host": server.host, "port": server.port, "database": server.database, "user": server.user},
        name="bench",
        credentials={"password": "BENCH_DB_PASSWORD"},
    )
    pool = await asyncpg.create_pool(
        host=server.host,
        port=server.port,
        database=server.database,
        user=server.user,
        password=server.password,
        min_size=1,
        max_size=1,
    )

    async def direct() -> Any:
        async with pool.acquire() as conn:
            transaction = conn.transaction(readonly=True)
            await transaction.start()
            try:
                statement = await conn.prepare(QUERY)
                cursor = await statement.cursor(500)
                return await cursor.fetch(LIMIT + 1)
            finally:
                await transaction.rollback()

    async def through_connector() -> Any:
        return await connector.execute(
            "postgres.query", {"sql": QUERY, "params": [500], "limit": LIMIT}, env=env
        )

    assert len(await direct()) == LIMIT + 1
    result = await through_connector()
    assert result["row_count"] == LIMIT and result["truncated"] is True
    try:
        bare, wrapped = await _interleaved(direct, through_connector)
    finally:
        await connector.aclose()
        await pool.close()
    b50, w50 = statistics.median(bare) * 1e6, statistics.median(wrapped) * 1e6
    b90, w90 = _percentile(bare, 0.9) * 1e6, _percentile(wrapped, 0.9) * 1e6
    print(f"postgres.query, {LIMIT} of 1,000 rows, {CALLS} calls each, interleaved in blocks of {BLOCK}:")
    print(f"  asyncpg directly (READ ONLY tx, prepared, cursor): p50 {b50:8.1f} us   p90 {b90:8.1f} us")
    print(f"  postgres.query (connector)                        : p50 {w50:8.1f} us   p90 {w90:8.1f} us")
    print(f"  overhead per call: p50 {w50 - b50:+.1f} us ({w50 / b50:.2f}x), p90 {w90 - b90:+.1f} us")


# Issue 36's figure: a 300-character query (a join, a filter, a group), both dialects.
QUERY_300 = (
    "SELECT i.name, o.qty, sum(o.qty * i.price) AS total, coalesce(r.comment, 'none') AS note FROM items i "
    "JOIN orders o ON o.item_id = i.id LEFT JOIN reviews r ON r.id = i.id WHERE i.price > 3 AND i.name "
    "LIKE '%a%' AND o.qty >= 1 AND i.id < 100000 GROUP BY i.name, o.qty, r.comment "
    "ORDER BY total DESC LIMIT 50"
)
STATEMENTS = {
    "short": "SELECT 1",
    "300 chars": QUERY_300,
    "typical": (
        "WITH recent AS (SELECT o.id, o.customer, o.total_cents FROM orders o WHERE o.updated_at > now() - "
        "interval '7 days' AND o.status <> 'cancelled;') SELECT customer, sum(total_cents) AS spent "
        "FROM recent GROUP BY customer HAVING sum(total_cents) > 1000 ORDER BY spent DESC -- the week's best"
    ),
    "long (8 KB)": "SELECT " + ", ".join(f"'value {i};' AS c{i}" for i in range(400)) + " FROM t LIMIT 10",  # noqa: S608
}


def _distinct(sql: str, round_: int) -> str:
    """The statement with its last number changed, so each round is a new text (no verdict cache hit)."""
    head, digits, tail = sql.rpartition(next(w for w in reversed(sql.split()) if w.isdigit()))
    return f"{head}{int(digits) + round_}{tail}"


def _guard_samples(check: Callable[[str], Any], sql: str, rounds: int) -> list[float]:
    timer = time.perf_counter
    texts = [_distinct(sql, 10_000_000 + n) for n in range(rounds)]
    for text in texts[: rounds // 10]:
        check(text)
    texts = [_distinct(sql, n) for n in range(rounds)]
    samples = []
    for text in texts:
        started = timer()
        check(text)
        samples.append(timer() - started)
    return samples


def _bench_guard() -> None:
    print("SQL guard (check_read) per statement, each round a distinct text, p50 / p90:")
    lines = [("postgres", "parser", functools.partial(check_read, dialect="postgres"))]
    lines.append(("mysql", "guard", functools.partial(check_read, dialect="mysql")))
    lines.append(("mysql", "parser only", parse_mysql))  # the same parse the guard falls back to
    for label, sql in STATEMENTS.items():
        rounds = 5_000 if len(sql) < 1000 else 300
        for dialect, how, check in lines:
            samples = _guard_samples(check, sql, rounds)
            p50, p90 = _percentile(samples, 0.5) * 1e6, _percentile(samples, 0.9) * 1e6
            what = f"{dialect:8s} {how:11s} {label:12s} {len(sql):5d} chars"
            print(f"  {what}: p50 {p50:8.1f} us, p90 {p90:8.1f} us")
    timer = time.perf_counter
    samples = []
    for _ in range(5_000):
        started = timer()
        check_read(QUERY_300, "mysql")
        samples.append(timer() - started)
    kept = _percentile(samples, 0.5) * 1e6
    print(f"  mysql    guard       the same 300 chars again (its verdict kept): p50 {kept:8.1f} us")


def main() -> None:
    with postgres_server() as server:
        asyncio.run(_bench_query(server))
    _bench_guard()


if __name__ == "__main__":
    main()
