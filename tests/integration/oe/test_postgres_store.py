"""What only the PostgreSQL store has: versioned migrations, a refusal of a newer schema, StoreUnavailable
while the server is away (and recovery when it is back), and its settings' errors."""

from __future__ import annotations

import asyncio
import signal

import asyncpg
import pytest

from agent_runtime.oe.store import PostgresStore, StoreUnavailable, open_store
from agent_runtime.oe.store.base import ParentLink
from agent_runtime.oe.store.postgres_schema import (
    PARENT_ID,
    SCHEMA_VERSION,
    SCHEMA_VERSION_TABLE,
    SchemaTooNew,
)
from tests.conftest import free_port
from tests.integration.oe.test_store import execution
from tests.integration.postgres import OE_PASSWORD, RunningPostgres, running_postgres


def test_replicas_opening_at_once_migrate_once(oe_postgres: RunningPostgres) -> None:
    dsn = oe_postgres.new_database()

    async def scenario() -> list[int]:
        stores = [PostgresStore(dsn, pool_size=2) for _ in range(5)]
        await asyncio.gather(*(store.open() for store in stores))
        try:
            conn = await asyncpg.connect(dsn)
            try:
                rows = await conn.fetch(f"SELECT version FROM {SCHEMA_VERSION_TABLE} ORDER BY version")  # noqa: S608
            finally:
                await conn.close()
            assert await stores[0].schema_version() == SCHEMA_VERSION
            return [row[0] for row in rows]
        finally:
            await asyncio.gather(*(store.close() for store in stores))

    assert asyncio.run(scenario()) == list(range(1, SCHEMA_VERSION + 1))


def test_migration_5_indexes_a_childs_parent_and_the_query_uses_it(oe_postgres: RunningPostgres) -> None:
    """agentRef (issue 38): a parent's children are found by migration 5's expression index, the very
    expression the store's query writes (postgres_schema.PARENT_ID), not by a scan of every execution."""
    dsn = oe_postgres.new_database()

    async def scenario() -> str:
        store = PostgresStore(dsn, pool_size=2)
        await store.open()
        try:
            link = ParentLink(execution_id="e-parent", step=1, agent="team-a/echo")
            await store.create_execution(execution("e-child").model_copy(update={"parent": link}))
            await store.create_execution(execution("e-plain"))
            page = await store.list_executions(parent_execution_id="e-parent")
            assert [r.execution_id for r in page.items] == ["e-child"]
            conn = await asyncpg.connect(dsn)
            try:
                await conn.execute("SET enable_seqscan = off")  # two rows: make the planner show its choice
                rows = await conn.fetch(
                    f"EXPLAIN SELECT fields FROM executions WHERE {PARENT_ID} = 'e-parent'"  # noqa: S608
                )
            finally:
                await conn.close()
            return "\n".join(str(row[0]) for row in rows)
        finally:
            await store.close()

    assert "executions_by_parent" in asyncio.run(scenario())


def test_a_schema_newer_than_the_oe_knows_is_refused_naming_both_versions(
    oe_postgres: RunningPostgres,
) -> None:
    dsn = oe_postgres.new_database()

    async def scenario() -> None:
        store = PostgresStore(dsn)
        await store.open()
        await store.close()
        conn = await asyncpg.connect(dsn)
        try:
            newer = f"INSERT INTO {SCHEMA_VERSION_TABLE} (version) VALUES ($1)"  # noqa: S608
            await conn.execute(newer, SCHEMA_VERSION + 3)
        finally:
            await conn.close()
        with pytest.raises(SchemaTooNew) as refused:
            await PostgresStore(dsn).open()
        message = str(refused.value)
        assert f"version {SCHEMA_VERSION + 3}" in message and f"version {SCHEMA_VERSION} " in message

    asyncio.run(scenario())


def test_an_unreachable_server_is_unavailable_without_the_password() -> None:
    dsn = f"postgresql://oe:{OE_PASSWORD}@127.0.0.1:{free_port()}/oe"

    async def scenario() -> None:
        with pytest.raises(StoreUnavailable) as refused:
            await PostgresStore(dsn).open()
        assert OE_PASSWORD not in str(refused.value) and "OE_POSTGRES_URL" in str(refused.value)

    asyncio.run(scenario())


def test_calls_while_the_server_restarts_are_unavailable_then_work_again() -> None:
    with running_postgres(max_connections=20) as server:
        dsn = server.new_database()

        async def before(store: PostgresStore) -> None:
            await store.create_execution(execution("e-1"))

        async def scenario() -> None:
            store = PostgresStore(dsn, pool_size=3)
            await store.open()
            try:
                await before(store)
                await asyncio.to_thread(server.stop, sig=signal.SIGKILL)
                with pytest.raises(StoreUnavailable) as gone:
                    await store.get_execution("e-1")
                assert OE_PASSWORD not in str(gone.value)
                await asyncio.to_thread(server.start)
                # The pool drops its dead connections and opens new ones: no restart of the OE needed.
                for _ in range(3):
                    try:
                        record = await store.get_execution("e-1")
                        break
                    except StoreUnavailable:
                        await asyncio.sleep(0.2)
                assert record == execution("e-1")
            finally:
                await store.close()

        asyncio.run(scenario())


@pytest.mark.parametrize(
    ("url", "size", "names"),
    [
        ("", 10, "OE_POSTGRES_URL"),
        ("mysql://u:secret-pw@h/db", 10, "OE_POSTGRES_URL"),
        ("postgresql://u:secret-pw@h/db", 0, "OE_POSTGRES_POOL_SIZE"),
    ],
)
def test_bad_settings_name_the_variable_and_never_the_password(url: str, size: int, names: str) -> None:
    with pytest.raises(ValueError) as refused:
        open_store(
            store_type="postgres",
            sqlite_path=None,
            mongodb_uri=None,
            mongodb_database="x",
            postgres_url=url,
            postgres_pool_size=size,
        )
    assert names in str(refused.value) and "secret-pw" not in str(refused.value)
