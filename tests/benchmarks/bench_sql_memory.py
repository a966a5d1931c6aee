"""`postgres.query` / `mysql.query` memory: peak RSS above idle for ten rows of 30 MiB cells (issue 36).

Real PostgreSQL and MariaDB (Debian's packages) each hold a table of ten 30 MiB text cells. A fresh
process per measurement (tests/benchmarks/sql_memory_child.py) reads them once through the connector
(cells cut by the server or on the wire) and once through the driver alone (every cell fetched whole, what
the connector did before), and reports its peak RSS above its idle RSS (the kernel's high-water mark,
reset after warm-up). Printed, never asserted; the target is under 50 MiB above idle.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pymysql

from tests.peers.servers import SqlServer, mariadb_server, postgres_server

CELL_BYTES = 30 * 1024 * 1024
ROWS = 10
ROOT = Path(__file__).resolve().parents[2]


def _load_postgres(server: SqlServer) -> None:
    async def go() -> None:
        conn = await asyncpg.connect(**server.admin)
        try:
            await conn.execute("CREATE TABLE big_cells (id int PRIMARY KEY, body text)")
            # md5 chains do not compress: the server stores and sends 30 MiB a cell
            await conn.execute(
                f"INSERT INTO big_cells SELECT g, (SELECT string_agg(md5(g::text || i::text), '') "  # noqa: S608
                f"FROM generate_series(1, {CELL_BYTES // 32}) i) FROM generate_series(1, {ROWS}) g"
            )
            await conn.execute(f"ALTER TABLE big_cells OWNER TO {server.user}")
        finally:
            await conn.close()

    asyncio.run(go())


def _load_mariadb(server: SqlServer) -> None:
    conn = pymysql.connect(**server.admin, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL max_allowed_packet = 256 * 1024 * 1024")
    finally:
        conn.close()
    conn = pymysql.connect(**server.admin, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE big_cells (id int PRIMARY KEY, body LONGTEXT)")
            for row in range(1, ROWS + 1):
                cur.execute(
                    "INSERT INTO big_cells VALUES (%s, REPEAT(MD5(%s), %s))", (row, row, CELL_BYTES // 32)
                )
    finally:
        conn.close()


def _measure(kind: str, mode: str, server: SqlServer) -> dict[str, Any]:
    config = {
        "host": server.host,
        "port": server.port,
        "database": server.database,
        "user": server.user,
        "password": server.password,
    }
    out = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.sql_memory_child", kind, mode, json.dumps(config)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _report(kind: str, server: SqlServer) -> None:
    for mode in ("driver", "connector"):
        figures = _measure(kind, mode, server)
        above = (figures["peak_kib"] - figures["idle_kib"]) / 1024
        print(
            f"  {kind:8s} {mode:9s}: idle {figures['idle_kib'] / 1024:6.1f} MiB, peak {above:7.1f} MiB above "
            f"idle, answer {figures['answer_bytes'] / 1024:.0f} KiB",
            flush=True,
        )


def main() -> None:
    print(f"peak RSS above idle reading {ROWS} rows of {CELL_BYTES // 2**20} MiB cells (target < 50 MiB):")
    with postgres_server() as server:
        _load_postgres(server)
        _report("postgres", server)
    with mariadb_server() as server:
        _load_mariadb(server)
        _report("mysql", server)


if __name__ == "__main__":
    main()
