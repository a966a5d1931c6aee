"""postgres and mysql connectors against real PostgreSQL and MariaDB: the guard's corpora, caps, timeouts,
bad credentials, unreachable servers, and `execute`."""

from __future__ import annotations

import asyncio
import base64
import glob
import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import asyncpg
import pymysql
import pytest

from agent_runtime.connectors.builtin.mysql import MysqlConnector
from agent_runtime.connectors.builtin.postgres import PostgresConnector
from agent_runtime.connectors.errors import ToolArgumentError
from agent_runtime.connectors.framework import BuiltinConnector, BuiltinToolError
from tests.conftest import free_port
from tests.integration.builtin.conftest import run
from tests.integration.builtin.sql_corpus import PWNED, READS, TRICKS
from tests.peers.servers import SqlServer

ENV_NAME = "SHOP_DB_PASSWORD"
WAL_NOISE_BYTES = 256 * 1024  # hint bits and autovacuum; one pg_logical_emit_message call writes ~5 MB
LOCK_NAMES = ("ae_lock", "x", "a")

PG_SCHEMA = [
    "CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL, price numeric(10,2) NOT NULL)",
    "CREATE TABLE orders (id serial PRIMARY KEY, item_id int, qty int, updated_at timestamptz DEFAULT now(), "
    "deleted boolean DEFAULT false, created_by text DEFAULT 'ada', insert_ts timestamptz DEFAULT now())",
    "CREATE TABLE reviews (id serial PRIMARY KEY, comment text)",
    "CREATE TABLE numbers (n int PRIMARY KEY)",
    "CREATE TABLE releases (id int PRIMARY KEY, release text)",
    "INSERT INTO items(name, price) VALUES ('apple', 3.5), ('pear', 12), (';', 1), ('b;c', 7)",
    "INSERT INTO orders(item_id, qty) VALUES (1, 2), (2, 1)",
    "INSERT INTO reviews(comment) VALUES ('good; really')",
    "INSERT INTO releases VALUES (1, 'v1')",
    "INSERT INTO numbers SELECT generate_series(1, 10000)",
    "CREATE FUNCTION bump() RETURNS int LANGUAGE plpgsql VOLATILE AS "
    "$$ BEGIN INSERT INTO items(name, price) VALUES ('bumped', 0); RETURN 1; END $$",
    "CREATE PROCEDURE bump_proc() LANGUAGE SQL AS $$ INSERT INTO items(name, price) VALUES ('proc', 0) $$",
]
MYSQL_SCHEMA = [
    "CREATE TABLE items (id int AUTO_INCREMENT PRIMARY KEY, name varchar(200) NOT NULL, price decimal(10,2))",
    "CREATE TABLE orders (id int AUTO_INCREMENT PRIMARY KEY, item_id int, qty int, "
    "updated_at timestamp DEFAULT CURRENT_TIMESTAMP, deleted boolean DEFAULT false, "
    "created_by varchar(20) DEFAULT 'ada', insert_ts timestamp DEFAULT CURRENT_TIMESTAMP)",
    "CREATE TABLE reviews (id int AUTO_INCREMENT PRIMARY KEY, comment text)",
    "CREATE TABLE numbers (n int PRIMARY KEY)",
    "CREATE TABLE releases (id int PRIMARY KEY, `release` text)",
    "INSERT INTO items(name, price) VALUES ('apple', 3.5), ('pear', 12), (';', 1), ('b;c', 7)",
    "INSERT INTO orders(item_id, qty) VALUES (1, 2), (2, 1)",
    "INSERT INTO reviews(comment) VALUES ('good; really')",
    "INSERT INTO releases VALUES (1, 'v1')",
    "INSERT INTO numbers SELECT seq FROM seq_1_to_10000",
    "CREATE FUNCTION bump() RETURNS INT MODIFIES SQL DATA "
    "BEGIN INSERT INTO items(name, price) VALUES ('bumped', 0); RETURN 1; END",
    "CREATE PROCEDURE bump_proc() MODIFIES SQL DATA INSERT INTO items(name, price) VALUES ('proc', 0)",
]


def _pg_admin(server: SqlServer, sql: str) -> Any:
    async def go() -> Any:
        conn = await asyncpg.connect(**server.admin)
        try:
            return await conn.fetch(sql)
        finally:
            await conn.close()

    return asyncio.run(go())


def _maria_admin(server: SqlServer, sql: str) -> Any:
    conn = pymysql.connect(**server.admin, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def pg(postgres: SqlServer) -> SqlServer:
    _pg_admin(postgres, "CREATE EXTENSION IF NOT EXISTS dblink")
    for statement in PG_SCHEMA:
        _pg_admin(postgres, statement)
    _pg_admin(postgres, f"ALTER TABLE items OWNER TO {postgres.user}")
    for table in ("orders", "reviews", "numbers", "releases"):
        _pg_admin(postgres, f"ALTER TABLE {table} OWNER TO {postgres.user}")
    _pg_admin(postgres, f"ALTER FUNCTION bump() OWNER TO {postgres.user}")
    return postgres


@pytest.fixture(scope="module")
def maria(mariadb: SqlServer) -> SqlServer:
    _maria_admin(mariadb, "SET GLOBAL log_bin_trust_function_creators = 1")
    for statement in MYSQL_SCHEMA:
        _maria_admin(mariadb, statement)
    return mariadb


def connector(kind: str, server: SqlServer, **config: Any) -> BuiltinConnector:
    cls = PostgresConnector if kind == "postgres" else MysqlConnector
    return cls(
        {
            "host": server.host,
            "port": server.port,
            "database": server.database,
            "user": server.user,
            **config,
        },
        name="shop",
        credentials={"password": ENV_NAME},
    )


def call(
    conn: BuiltinConnector, tool: str, server: SqlServer, *, password: str | None = None, **args: Any
) -> Any:
    env = {ENV_NAME: server.password if password is None else password}

    async def go() -> Any:
        try:
            return await conn.execute(tool, args, env=env)
        finally:
            await conn.aclose()

    return run(go())


def snapshot(kind: str, server: SqlServer) -> Any:
    """Everything a write could change: tables, row contents, sequences, large objects, trick files."""
    files = sorted(glob.glob(f"{PWNED}*"))
    if kind == "postgres":
        tables = _pg_admin(
            server,
            "SELECT table_schema || '.' || table_name FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1",
        )
        names = [row[0] for row in tables]
        contents = {
            name: _pg_admin(
                server,
                f"SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM {name} t",  # noqa: S608 - table names from the catalog
            )[0][0]
            for name in names
        }
        extra = _pg_admin(server, "SELECT last_value, is_called FROM items_id_seq")[0]
        objects = _pg_admin(server, "SELECT count(*) FROM pg_largeobject_metadata")[0][0]
        columns = _pg_admin(
            server, "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'public'"
        )
        return names, contents, tuple(extra), objects, columns[0][0], files
    tables = [row[0] for row in _maria_admin(server, "SHOW TABLES")]
    sums = _maria_admin(server, f"CHECKSUM TABLE {', '.join(tables)}")
    increments = _maria_admin(
        server, "SELECT table_name, auto_increment FROM information_schema.tables WHERE table_schema = 'shop'"
    )
    columns = _maria_admin(
        server, "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'shop'"
    )
    return tables, sums, sorted(increments), columns, files


def _server(kind: str, pg: SqlServer, maria: SqlServer) -> SqlServer:
    return pg if kind == "postgres" else maria


@pytest.fixture(params=["postgres", "mysql"])
def engine(
    request: pytest.FixtureRequest, pg: SqlServer, maria: SqlServer
) -> Iterator[tuple[str, SqlServer]]:
    yield request.param, _server(request.param, pg, maria)


# The bypass corpus: see test_sql_corpus.py (one connection per engine, side effects checked) -------------


def test_a_write_the_text_check_does_not_see_is_stopped_by_read_only(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    with pytest.raises(BuiltinToolError) as caught:
        call(connector(kind, server), f"{kind}.query", server, sql="SELECT bump()")
    assert caught.value.category == "read_only_violation"


def test_data_modifying_cte_is_caught_by_the_parser_first(pg: SqlServer) -> None:
    with pytest.raises(BuiltinToolError) as caught:
        call(
            connector("postgres", pg),
            "postgres.query",
            pg,
            sql="WITH d AS (DELETE FROM items RETURNING *) SELECT * FROM d",
        )
    assert caught.value.category == "query_refused"
    assert "DELETE is not allowed" in caught.value.explanation


# Legitimate reads ----------------------------------------------------------------------------------------


def _reads(kind: str) -> list[Any]:
    return [r for r in READS if r.dialect in ("both", kind)]


def test_semicolon_inside_strings_reads_the_right_rows(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    result = call(
        connector(kind, server), f"{kind}.query", server, sql="SELECT name FROM items WHERE name = ';'"
    )
    assert result["rows"] == [[";"]]


# Caps, timeouts, failures ------------------------------------------------------------------------------


def test_default_cap_is_100_rows_and_truncated_says_more_matched(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    result = call(connector(kind, server), f"{kind}.query", server, sql="SELECT n FROM numbers ORDER BY n")
    assert result["row_count"] == 100 and result["truncated"] is True
    assert result["rows"][0] == [1] and result["rows"][-1] == [100]


def test_limit_up_to_1000_and_no_more(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    result = call(connector(kind, server), f"{kind}.query", server, sql="SELECT n FROM numbers", limit=1000)
    assert result["row_count"] == 1000 and result["truncated"] is True
    with pytest.raises(ToolArgumentError, match="limit: must be at most 1000"):
        call(connector(kind, server), f"{kind}.query", server, sql="SELECT n FROM numbers", limit=5000)


def test_small_results_are_not_truncated(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    result = call(
        connector(kind, server), f"{kind}.query", server, sql="SELECT n FROM numbers WHERE n <= 3", limit=3
    )
    assert result == {"columns": ["n"], "rows": [[1], [2], [3]], "row_count": 3, "truncated": False}


def test_a_query_that_runs_too_long_is_a_timeout(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    sql = "SELECT count(*) FROM numbers a, numbers b, numbers c"
    with pytest.raises(BuiltinToolError) as caught:
        call(connector(kind, server, statement_timeout_s=0.5), f"{kind}.query", server, sql=sql)
    assert caught.value.category == "timeout"


def test_wrong_password_is_auth_and_names_no_password(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    wrong = "Wrong-Canary-1234"
    with pytest.raises(BuiltinToolError) as caught:
        call(connector(kind, server), f"{kind}.query", server, password=wrong, sql="SELECT 1")
    assert caught.value.category == "auth"
    assert wrong not in caught.value.explanation and server.password not in caught.value.explanation


def test_unreachable_database_is_connection(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    conn = connector(kind, server, port=free_port(), connect_timeout_s=2)
    with pytest.raises(BuiltinToolError) as caught:
        call(conn, f"{kind}.query", server, sql="SELECT 1")
    assert caught.value.category == "connection"


def test_unknown_table_is_a_query_error_the_model_can_read(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    with pytest.raises(BuiltinToolError) as caught:
        call(connector(kind, server), f"{kind}.query", server, sql="SELECT * FROM no_such_table")
    assert caught.value.category == "query_error"
    assert "no_such_table" in caught.value.explanation


def test_test_connection(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    conn = connector(kind, server, connect_timeout_s=2)
    env = {ENV_NAME: server.password}
    ok = run(_tested(conn, env))
    assert ok.ok, ok.detail
    bad = run(_tested(connector(kind, server), {ENV_NAME: "nope"}))
    assert not bad.ok and bad.detail.startswith("auth:")


async def _tested(conn: BuiltinConnector, env: dict[str, str]) -> Any:
    try:
        return await conn.test_connection(env=env)
    finally:
        await conn.aclose()


# execute -------------------------------------------------------------------------------------------------


def test_execute_runs_one_write_and_commits(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    placeholder = "($1, $2)" if kind == "postgres" else "(%s, %s)"
    result = call(
        connector(kind, server),
        f"{kind}.execute",
        server,
        sql=f"INSERT INTO reviews(id, comment) VALUES {placeholder}",  # noqa: S608
        params=[777, "written; by execute"],
    )
    assert result["rows_affected"] == 1
    read = call(connector(kind, server), f"{kind}.query", server, sql="SELECT * FROM reviews WHERE id = 777")
    assert read["rows"] == [[777, "written; by execute"]]
    call(connector(kind, server), f"{kind}.execute", server, sql="DELETE FROM reviews WHERE id = 777")


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM items WHERE id = 1; DROP TABLE items",
        "UPDATE items SET price = 0; COMMIT",
        "BEGIN",
        "COMMIT",
        "SELECT 1 /*! ; DROP TABLE items */",
        "",
        "   ;  ",
    ],
)
def test_execute_refuses_chaining_and_transaction_control(engine: tuple[str, SqlServer], sql: str) -> None:
    kind, server = engine
    if kind == "postgres" and "/*!" in sql:
        pytest.skip("a MySQL executable comment is an ordinary comment to PostgreSQL")
    before = snapshot(kind, server)
    with pytest.raises((BuiltinToolError, ToolArgumentError)) as caught:
        call(connector(kind, server), f"{kind}.execute", server, sql=sql)
    if isinstance(caught.value, BuiltinToolError):
        assert caught.value.category == "query_refused"
    assert snapshot(kind, server) == before


# The corpora: tricks (0 writes, 0 side effects) and legitimate reads (0 refused), one connection each ----

PG_PROBE = (
    "SELECT current_setting('statement_timeout'), current_setting('ae.x', true), "
    "current_setting('search_path'), current_setting('default_transaction_read_only'), "
    "(SELECT count(*) FROM pg_prepared_statements), (SELECT count(*) FROM pg_cursors)"
)
MYSQL_PROBE = "SELECT LAST_INSERT_ID(), @ae, @p, @x, @@session.sql_mode, @@session.character_set_client"


async def _pg_state(admin: Any, kind_snapshot: Any) -> dict[str, Any]:
    return {
        "contents": kind_snapshot,
        "locks": await admin.fetchval(
            "SELECT count(*) FROM pg_locks WHERE pid <> pg_backend_pid() AND locktype <> 'virtualxid'"
        ),
        "advisory": await admin.fetchval("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"),
        "slots": await admin.fetchval("SELECT count(*) FROM pg_replication_slots"),
        "lsn": await admin.fetchval("SELECT pg_current_wal_lsn()::text"),
        "files": sorted(glob.glob(f"{PWNED}*")),
    }


async def _pg_snapshot(admin: Any) -> Any:
    names = [
        row[0]
        for row in await admin.fetch(
            "SELECT table_schema || '.' || table_name FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1"
        )
    ]
    contents = {
        name: await admin.fetchval(
            f"SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM {name} t"  # noqa: S608 - names from the catalog
        )
        for name in names
    }
    sequence = tuple(await admin.fetchrow("SELECT last_value, is_called FROM items_id_seq"))
    objects = await admin.fetchval("SELECT count(*) FROM pg_largeobject_metadata")
    return names, contents, sequence, objects


async def _pg_corpus(server: SqlServer) -> tuple[Counter[str], list[str], list[str]]:
    admin = await asyncpg.connect(**server.admin)
    # Another client's session of the same role (which the role could signal): it must survive every trick.
    agent = {**server.admin, "user": server.user, "password": server.password}
    victim = await asyncpg.connect(**agent)
    victim_pid = await victim.fetchval("SELECT pg_backend_pid()")
    conn = connector("postgres", server)
    env = {ENV_NAME: server.password}
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    try:
        probe = (await conn.execute("postgres.query", {"sql": PG_PROBE}, env=env))["rows"]
        for trick in TRICKS:
            before = await _pg_state(admin, await _pg_snapshot(admin))
            outcome = await _attempt(conn, "postgres", trick.sql, env, server)
            outcomes[outcome] += 1
            after = await _pg_state(admin, await _pg_snapshot(admin))
            wal = await admin.fetchval(
                "SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)::bigint",
                after["lsn"],
                before["lsn"],
            )
            if wal > WAL_NOISE_BYTES:
                failures.append(f"{trick.name}: {wal} bytes of WAL written ({outcome})")
            before.pop("lsn"), after.pop("lsn")
            if after != before:
                failures.append(f"{trick.name}: changed {_diff(before, after)} ({outcome})")
            alive = await admin.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", victim_pid)
            if alive != 1:
                failures.append(f"{trick.name}: another session was terminated ({outcome})")
                victim = await asyncpg.connect(**agent)
                victim_pid = await victim.fetchval("SELECT pg_backend_pid()")
            state = (await conn.execute("postgres.query", {"sql": PG_PROBE}, env=env))["rows"]
            if state != probe:
                failures.append(f"{trick.name}: session state left for the next call: {state} ({outcome})")
        refused = await _reads_refused(conn, "postgres", env)
    finally:
        await conn.aclose()
        await victim.close()
        await admin.close()
    return outcomes, failures, refused


def _maria_state(admin: Any, victim_id: int) -> dict[str, Any]:
    with admin.cursor() as cur:
        tables = [row[0] for row in _fetch(cur, "SHOW TABLES")]
        sums = _fetch(cur, f"CHECKSUM TABLE {', '.join(tables)}")
        increments = sorted(
            _fetch(
                cur,
                "SELECT table_name, auto_increment FROM information_schema.tables "
                "WHERE table_schema = 'shop'",
            )
        )
        writes = _fetch(
            cur,
            "SELECT variable_name, variable_value FROM information_schema.global_status WHERE variable_name "
            "IN ('INNODB_ROWS_INSERTED', 'INNODB_ROWS_UPDATED', 'INNODB_ROWS_DELETED') ORDER BY 1",
        )
        locks = _fetch(cur, "SELECT " + ", ".join(f"IS_USED_LOCK('{name}')" for name in LOCK_NAMES))
        sessions = _fetch(
            cur,
            "SELECT count(*) FROM information_schema.processlist "  # noqa: S608 - an integer
            f"WHERE user = 'agent' AND id <> {int(victim_id)}",
        )
    files = sorted(glob.glob(f"{PWNED}*"))
    return {
        "tables": tables,
        "sums": sums,
        "increments": increments,
        "writes": writes,
        "locks": locks,
        "agent sessions": sessions,
        "files": files,
    }


def _fetch(cur: Any, sql: str) -> Any:
    cur.execute(sql)
    return tuple(tuple(row) for row in cur.fetchall())


def _settled_maria_state(admin: Any, victim_id: int, before: dict[str, Any] | None = None) -> dict[str, Any]:
    """The server notices a closed connection a moment later: give its locks and session time to go (the
    connector's sessions must all be gone, whatever `before` caught)."""
    deadline = time.monotonic() + 3
    while True:
        state = _maria_state(admin, victim_id)
        settled = state["agent sessions"] == ((0,),)
        if (settled and (before is None or state == before)) or time.monotonic() > deadline:
            return state
        time.sleep(0.05)


async def _maria_corpus(server: SqlServer) -> tuple[Counter[str], list[str], list[str]]:
    admin = pymysql.connect(**server.admin, autocommit=True)
    agent = {**server.admin, "user": server.user, "password": server.password}
    victim = pymysql.connect(**agent, autocommit=True)  # another session of the same user
    victim_id = victim.thread_id()
    conn = connector("mysql", server)
    env = {ENV_NAME: server.password}
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    try:
        probe = (await conn.execute("mysql.query", {"sql": MYSQL_PROBE}, env=env))["rows"]
        for trick in TRICKS:
            before = _settled_maria_state(admin, victim_id)
            outcome = await _attempt(conn, "mysql", trick.sql, env, server)
            outcomes[outcome] += 1
            after = _settled_maria_state(admin, victim_id, before)
            if after != before:
                failures.append(f"{trick.name}: changed {_diff(before, after)} ({outcome})")
            with admin.cursor() as cur:
                alive = _fetch(
                    cur,
                    f"SELECT count(*) FROM information_schema.processlist WHERE id = {int(victim_id)}",  # noqa: S608
                )
            if alive != ((1,),):
                failures.append(f"{trick.name}: another session was killed ({outcome})")
                victim = pymysql.connect(**agent, autocommit=True)
                victim_id = victim.thread_id()
            state = (await conn.execute("mysql.query", {"sql": MYSQL_PROBE}, env=env))["rows"]
            if state != probe:
                failures.append(f"{trick.name}: session state left for the next call: {state} ({outcome})")
        refused = await _reads_refused(conn, "mysql", env)
    finally:
        await conn.aclose()
        victim.close()
        admin.close()
    return outcomes, failures, refused


def _diff(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return [key for key in before if before[key] != after.get(key)]


async def _attempt(
    conn: BuiltinConnector, kind: str, sql: str, env: dict[str, str], server: SqlServer
) -> str:
    try:
        await conn.execute(f"{kind}.query", {"sql": sql}, env=env)
    except BuiltinToolError as exc:
        assert server.password not in exc.explanation
        assert exc.category in ("query_refused", "read_only_violation", "query_error", "forbidden"), exc
        return exc.category
    except ToolArgumentError:
        return "bad argument"
    return "ran, changed nothing"


async def _reads_refused(conn: BuiltinConnector, kind: str, env: dict[str, str]) -> list[str]:
    refused: list[str] = []
    for read in _reads(kind):
        try:
            result = await conn.execute(
                f"{kind}.query", {"sql": read.sql, "params": list(read.params)}, env=env
            )
        except BuiltinToolError as exc:
            refused.append(f"{read.name}: {exc.category}: {exc.explanation}")
            continue
        json.dumps(result)
    return refused


def test_the_corpora_are_large_enough() -> None:
    assert len(TRICKS) >= 150 and len({t.name for t in TRICKS}) == len(TRICKS)
    assert len(_reads("postgres")) >= 60 and len(_reads("mysql")) >= 60
    names = {r.name for r in READS}
    # every false positive the issue lists
    for name in (
        "replace() the function",
        "INSERT() the MariaDB string function",
        "column named comment",
        "column named release",
        "CAST AS CHAR CHARACTER SET",
        "EXPLAIN",
        "SHOW a setting",
        "SHOW TABLES",
        "TABLE t",
        "VALUES (1)",
        "DATE_FORMAT next to a parameter",
    ):
        assert name in names, name


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_corpus_no_write_no_side_effect_no_false_positive(kind: str, pg: SqlServer, maria: SqlServer) -> None:
    """Every trick against the real server: tables, sessions, locks, WAL, files and session state checked
    after each; then every legitimate read must work."""
    server = _server(kind, pg, maria)
    outcomes, failures, refused = run(_pg_corpus(server) if kind == "postgres" else _maria_corpus(server))
    print(
        f"\n{kind}: {len(TRICKS)} tricks, outcomes {dict(outcomes)}; "
        f"{len(_reads(kind))} reads, {len(refused)} refused"
    )
    assert failures == []
    assert refused == []


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_test_connection_reports_a_superuser_and_names_the_fix(
    kind: str, pg: SqlServer, maria: SqlServer
) -> None:
    server = _server(kind, pg, maria)
    admin = server.admin
    strong = (PostgresConnector if kind == "postgres" else MysqlConnector)(
        {"host": admin["host"], "port": admin["port"], "database": admin["database"], "user": admin["user"]},
        name="shop",
        credentials={"password": ENV_NAME},
    )
    result = run(_tested(strong, {ENV_NAME: admin["password"]}))
    assert not result.ok
    assert result.detail.startswith("privileges: ") and "superuser" in result.detail
    assert "GRANT SELECT" in result.detail
    if admin["password"]:
        assert admin["password"] not in result.detail


def test_test_connection_reports_a_role_that_can_write_when_read_only(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    result = run(_tested(connector(kind, server, read_only=True), {ENV_NAME: server.password}))
    assert not result.ok and result.detail.startswith("privileges: ") and "can write" in result.detail
    assert server.password not in result.detail
    # without read_only, the same role is fine (it is meant to run approved writes)
    assert run(_tested(connector(kind, server), {ENV_NAME: server.password})).ok


def test_a_read_only_role_passes_test_connection(pg: SqlServer, maria: SqlServer) -> None:
    _pg_admin(pg, "CREATE ROLE agent_ro LOGIN PASSWORD 'ro-pass-1'")
    _pg_admin(pg, "GRANT USAGE ON SCHEMA public TO agent_ro")
    _pg_admin(pg, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO agent_ro")
    _maria_admin(maria, "CREATE USER 'agent_ro'@'127.0.0.1' IDENTIFIED BY 'ro-pass-1'")
    _maria_admin(maria, "GRANT SELECT, SHOW VIEW ON shop.* TO 'agent_ro'@'127.0.0.1'")
    for kind, server in (("postgres", pg), ("mysql", maria)):
        conn = connector(kind, server, user="agent_ro", read_only=True)
        result = run(_tested(conn, {ENV_NAME: "ro-pass-1"}))
        assert result.ok, result.detail


def test_read_only_connector_refuses_execute(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    with pytest.raises(BuiltinToolError) as caught:
        call(connector(kind, server, read_only=True), f"{kind}.execute", server, sql="DELETE FROM items")
    assert caught.value.category == "query_refused"


# Bounded cells and results ------------------------------------------------------------------------------


def test_postgres_cells_are_cut_by_the_server(pg: SqlServer) -> None:
    sql = (
        "SELECT repeat('é', 50000) AS t, decode(repeat('ab', 30000), 'hex') AS b, "
        "array_fill(7, ARRAY[20000]) AS a, 42 AS n, NULL::text AS z, "
        "jsonb_build_object('k', repeat('x', 20000)) AS j"
    )
    result = call(connector("postgres", pg), "postgres.query", pg, sql=sql)
    text, data, array, number, null, document = result["rows"][0]
    assert text == "é" * 10_000 + "…"
    assert len(base64.b64decode(data["base64"])) == 10_000
    assert isinstance(array, str) and array.startswith("{7,7") and array.endswith("…")
    assert number == 42 and null is None
    assert document.startswith('{"k": "xxx') and document.endswith("…")
    assert result["columns"] == ["t", "b", "a", "n", "z", "j"]


def test_mysql_cells_are_cut_on_the_wire_even_past_one_packet(maria: SqlServer) -> None:
    _maria_admin(maria, "SET GLOBAL max_allowed_packet = 64 * 1024 * 1024")
    big = 17 * 1024 * 1024  # a row over one 16 MiB protocol packet
    sql = f"SELECT 1 AS n, REPEAT('é', {big // 2}) AS t, NULL AS z, 2.5 AS d, REPEAT('x', 5) AS s"
    result = call(connector("mysql", maria), "mysql.query", maria, sql=sql)
    number, text, null, decimal_value, small = result["rows"][0]
    assert number == 1 and null is None and decimal_value == "2.5" and small == "xxxxx"
    assert text == "é" * 10_000 + "…"


def test_the_result_budget_truncates(engine: tuple[str, SqlServer]) -> None:
    kind, server = engine
    series = "generate_series(1, 1000) g" if kind == "postgres" else "seq_1_to_1000"
    sql = f"SELECT REPEAT('x', 9000) AS t FROM {series}"  # noqa: S608
    result = call(connector(kind, server), f"{kind}.query", server, sql=sql, limit=1000)
    assert result["truncated"] is True
    assert 400 <= result["row_count"] < 1000  # 4 MiB of 9 KB cells


SUPERUSER_TRICKS = {
    "postgres": [
        "SELECT pg_read_file('postgresql.conf')",
        "SELECT * FROM pg_ls_dir('.')",
        "SELECT pg_reload_conf()",
        'SELECT U&"pg_terminate_backend"(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()',
        "SELECT pg_logical_emit_message(false, 'x', 'y')",
        f"SELECT lo_export(lo_from_bytea(0, 'x'), '{PWNED}.su')",
    ],
    "mysql": [
        "SELECT LOAD_FILE('/etc/hostname')",
        f"SELECT 1 INTO OUTFILE '{PWNED}.su'",
        "SELECT `GET_LOCK`('ae_lock', 0)",
        "SELECT LAST_INSERT_ID(7)",
        # Shapes the fast path (`plain_read`) must leave to the parser: a call spelled with spaces, a
        # newline or a schema before its parenthesis, lower-cased in backticks, hidden after a string.
        "SELECT load_file ('/etc/hostname')",
        "SELECT mysql.GET_LOCK\n('ae_lock', 0)",
        "SELECT `get_lock` ('ae_lock', 0) FROM dual",
        "SELECT id, name FROM items WHERE name = 'a' AND GET_LOCK('ae_lock', 0) ORDER BY id LIMIT 5",
        f"SELECT id FROM items WHERE id = 1 INTO DUMPFILE '{PWNED}.dump'",  # noqa: S608
    ],
}


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_the_guard_holds_even_for_a_superuser_role(kind: str, pg: SqlServer, maria: SqlServer) -> None:
    """With a role that could do all of it (the issue's finding), the parser refuses each before it runs."""
    server = _server(kind, pg, maria)
    admin = server.admin
    strong = (PostgresConnector if kind == "postgres" else MysqlConnector)(
        {"host": admin["host"], "port": admin["port"], "database": admin["database"], "user": admin["user"]},
        name="shop",
        credentials={"password": ENV_NAME},
    )
    for sql in SUPERUSER_TRICKS[kind]:
        with pytest.raises(BuiltinToolError) as caught:
            call(strong, f"{kind}.query", server, password=admin["password"], sql=sql)
        assert caught.value.category == "query_refused", sql
    assert glob.glob(f"{PWNED}*") == []
