"""Leases in PostgreSQL (issue 35): one holder across replicas at a time, renewed by it, taken over by
another once its term ran out (its replica died)."""

from __future__ import annotations

import asyncio

from agent_runtime.oe.leases import StoreLeases, leases_for
from agent_runtime.oe.store import PostgresStore
from tests.integration.postgres import RunningPostgres

NOW = 1_000.0


def test_one_replica_holds_a_lease_until_it_stops_renewing(oe_postgres: RunningPostgres) -> None:
    dsn = oe_postgres.new_database()

    async def scenario() -> None:
        stores = [PostgresStore(dsn, pool_size=3) for _ in range(3)]
        for store in stores:
            await store.open()
        try:
            leases = [leases_for(store, holder=f"oe-{n}", term_s=10) for n, store in enumerate(stores)]
            assert all(isinstance(lease, StoreLeases) for lease in leases)
            for round_ in range(10):
                key = f"watchdog:e-{round_}"
                got = await asyncio.gather(
                    *(lease.acquire(key, now=NOW) for lease in leases for _ in range(3))
                )
                # Three replicas, three tries each, at once: every success is one replica's.
                assert len({i // 3 for i, won in enumerate(got) if won}) == 1, got
            # e-0: whoever holds it renews; the others are refused within the term, then take over.
            renewed = [await lease.acquire("watchdog:e-0", now=NOW + 1) for lease in leases]
            assert sum(renewed) == 1
            holder = renewed.index(True)
            others = [lease for i, lease in enumerate(leases) if i != holder]
            assert not any([await lease.acquire("watchdog:e-0", now=NOW + 10) for lease in others])
            taken = await asyncio.gather(*(lease.acquire("watchdog:e-0", now=NOW + 12) for lease in others))
            assert sum(taken) == 1
            assert not await leases[holder].acquire("watchdog:e-0", now=NOW + 13)  # it is not its any more
        finally:
            for store in stores:
                await store.close()

    asyncio.run(scenario())
