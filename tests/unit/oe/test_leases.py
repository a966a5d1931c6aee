"""Lease decisions (oe/leases.py): who may take a lease, and what taking it writes."""

from __future__ import annotations

import asyncio

from agent_runtime.oe.leases import LocalLeases, leases_for, may_take, taken
from agent_runtime.oe.store.leases import LeaseRecord

NOW = 1_000.0


def test_a_free_an_expired_or_an_own_lease_may_be_taken() -> None:
    held = LeaseRecord(key="watchdog:e-1", holder="a", expires_at=NOW + 5, version=3)
    assert may_take(None, holder="b", now=NOW)
    assert may_take(held, holder="a", now=NOW)  # renewing
    assert not may_take(held, holder="b", now=NOW)  # another holder's, still in its term
    assert may_take(held, holder="b", now=NOW + 5)  # its holder stopped renewing: taken over


def test_taking_keeps_the_version_read_for_the_compare_and_set() -> None:
    held = LeaseRecord(key="k", holder="a", expires_at=NOW, version=3)
    assert taken(held, key="k", holder="b", now=NOW, term_s=10) == LeaseRecord(
        key="k", holder="b", expires_at=NOW + 10, version=3
    )
    assert taken(None, key="k", holder="b", now=NOW, term_s=10).version == 0


def test_a_store_without_leases_gets_local_ones() -> None:
    leases = leases_for(object(), holder="a")
    assert isinstance(leases, LocalLeases)
    assert asyncio.run(leases.acquire("k", now=NOW))
