"""Which stores several OE replicas may share (issue 35): FerretDB v1 does not update a document atomically
across processes on either backend, so several replicas are refused there, naming the fix; PostgreSQL's
compare-and-set holds across replicas, which is why it is the store for several."""

from __future__ import annotations

import asyncio

import pytest

from agent_runtime.oe.store import MongoStore, PostgresStore, Store, open_store
from agent_runtime.oe.store.replicas import ferretdb_refusal
from agent_runtime.protocol import ExecutionState
from tests.integration.oe.test_store import execution
from tests.integration.postgres import RunningPostgres


@pytest.mark.parametrize("uri_fixture", ["ferretdb_uri", "ferretdb_pg_uri"])
def test_several_replicas_on_ferretdb_v1_are_refused_naming_the_fix(
    request: pytest.FixtureRequest, uri_fixture: str
) -> None:
    uri = request.getfixturevalue(uri_fixture)

    async def scenario() -> None:
        with pytest.raises(ValueError) as refused:
            await MongoStore(uri, "oe_replicas", replicas=3).open()
        assert "OE_REPLICAS=3" in str(refused.value) and "OE_STORE_TYPE=postgres" in str(refused.value)
        single = MongoStore(uri, "oe_replicas", replicas=1)
        await single.open()  # one replica is correct there
        await single.close()

    asyncio.run(scenario())


def test_sqlite_refuses_several_replicas() -> None:
    with pytest.raises(ValueError, match="OE_REPLICAS=2 with OE_STORE_TYPE=sqlite"):
        open_store(
            store_type="sqlite", sqlite_path="/tmp/x.db", mongodb_uri=None, mongodb_database="x", replicas=2
        )


def test_a_mongodb_server_that_is_not_ferretdb_v1_is_not_refused() -> None:
    assert ferretdb_refusal({"version": "8.0.4"}, replicas=3) is None
    assert ferretdb_refusal({"ferretdbVersion": "v2.1.0"}, replicas=3) is None
    assert ferretdb_refusal({"ferretdbVersion": "v1.24.2"}, replicas=1) is None
    assert ferretdb_refusal({"ferretdbVersion": "v1.24.2"}, replicas=2) is not None


def test_postgres_compare_and_set_has_one_winner_across_replicas(oe_postgres: RunningPostgres) -> None:
    """Four stores (four replicas' pools), eight racing transitions per execution, thirty executions."""
    dsn = oe_postgres.new_database()

    async def scenario() -> int:
        stores: list[Store] = [PostgresStore(dsn, pool_size=4) for _ in range(4)]
        for store in stores:
            await store.open()
        try:
            doubled = 0
            for i in range(30):
                await stores[0].create_execution(execution(f"e-{i}"))
                results = await asyncio.gather(
                    *(
                        stores[j % 4].transition(
                            f"e-{i}",
                            from_states=frozenset({ExecutionState.PENDING}),
                            changes={"status": ExecutionState.RUNNING, "runs": j},
                        )
                        for j in range(8)
                    )
                )
                doubled += sum(result is not None for result in results) != 1
            return doubled
        finally:
            for store in stores:
                await store.close()

    assert asyncio.run(scenario()) == 0
