"""One process reading ten rows of 30 MiB cells, as the Tool Pod would, and reporting its peak RSS.

`python -m tests.benchmarks.sql_memory_child <postgres|mysql> <connector|driver> <config json>`: warms up
(imports, one connection, one small query), resets the kernel's peak-RSS mark (/proc/self/clear_refs),
then runs the big read once and prints `{"idle_kib", "peak_kib", "answer_bytes"}`. `connector` is the
built-in connector's `*.query`; `driver` is the same rows fetched by the driver alone (the old way).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

QUERY = "SELECT id, body FROM big_cells ORDER BY id"


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


async def _connector(kind: str, config: dict[str, Any]) -> int:
    from agent_runtime.connectors.builtin.mysql import MysqlConnector
    from agent_runtime.connectors.builtin.postgres import PostgresConnector

    cls = PostgresConnector if kind == "postgres" else MysqlConnector
    password = config.pop("password")
    conn = cls(config, name="bench", credentials={"password": "BENCH_DB_PASSWORD"})
    env = {"BENCH_DB_PASSWORD": password}
    await conn.execute(f"{kind}.query", {"sql": "SELECT id FROM big_cells"}, env=env)
    _reset_peak()
    global IDLE
    IDLE = _status("VmRSS")
    result = await conn.execute(f"{kind}.query", {"sql": QUERY}, env=env)
    await conn.aclose()
    return len(json.dumps(result))


async def _driver(kind: str, config: dict[str, Any]) -> int:
    global IDLE
    if kind == "postgres":
        import asyncpg

        conn = await asyncpg.connect(
            host=config["host"],
            port=config["port"],
            user=config["user"],
            password=config["password"],
            database=config["database"],
        )
        await conn.fetch("SELECT id FROM big_cells")
        _reset_peak()
        IDLE = _status("VmRSS")
        rows = await conn.fetch(QUERY)
        size = sum(len(r["body"][:10_000]) for r in rows)
        await conn.close()
        return size
    import aiomysql

    conn = await aiomysql.connect(
        host=config["host"],
        port=config["port"],
        user=config["user"],
        password=config["password"],
        db=config["database"],
    )
    cursor = await conn.cursor(aiomysql.SSCursor)
    await cursor.execute("SELECT id FROM big_cells")
    await cursor.fetchall()
    _reset_peak()
    IDLE = _status("VmRSS")
    await cursor.execute(QUERY)
    size = 0
    while True:
        row = await cursor.fetchone()
        if row is None:
            break
        size += len(row[1][:10_000])
    conn.close()
    return size


IDLE = 0


def main() -> None:
    kind, mode, raw = sys.argv[1], sys.argv[2], sys.argv[3]
    config = json.loads(raw)
    size = asyncio.run((_connector if mode == "connector" else _driver)(kind, config))
    print(json.dumps({"idle_kib": IDLE, "peak_kib": _status("VmHWM"), "answer_bytes": size}))


if __name__ == "__main__":
    main()
