"""Leases: which OE replica looks after an execution's watchdog work, or delivers a drain, right now.

Several replicas run the same background loops over one store. Without leases each would restart the same
lost run (the restart's compare-and-set is on the status, which a restart leaves `running`) and send the
same drain. A lease names one holder until `expires_at`; the holder renews it each time it looks, another
replica takes it only once it has expired (its holder died or was cut off), so work moves on within one
lease term of a replica's loss.

The decisions are pure functions; `StoreLeases` keeps the records in a store that has them (PostgreSQL:
a compare-and-set on `version`), `LocalLeases` in memory for the stores that take one replica (SQLite,
and MongoDB, refused above one replica on FerretDB v1).
"""

from __future__ import annotations

from typing import Protocol

from agent_runtime.oe.store.leases import LeaseRecord

DEFAULT_TERM_S = 10.0


def may_take(current: LeaseRecord | None, *, holder: str, now: float) -> bool:
    """Free, expired, or already ours."""
    return current is None or current.holder == holder or current.expires_at <= now


def taken(current: LeaseRecord | None, *, key: str, holder: str, now: float, term_s: float) -> LeaseRecord:
    """The lease as `holder` writes it to take (or renew) it for `term_s` from `now`."""
    return LeaseRecord(
        key=key, holder=holder, expires_at=now + term_s, version=0 if current is None else current.version
    )


class LeaseStore(Protocol):
    """What a store keeps leases with."""

    async def get_lease(self, key: str) -> LeaseRecord | None: ...

    async def put_lease(self, record: LeaseRecord, *, create: bool) -> bool:
        """Insert (`create`) or replace if the stored version is still `record.version`; True if written."""


class Leases(Protocol):
    async def acquire(self, key: str, *, now: float) -> bool:
        """True when this replica holds `key` until at least `now` + the term."""


class StoreLeases:
    """Leases kept in the shared store: one holder across replicas."""

    def __init__(self, store: LeaseStore, *, holder: str, term_s: float = DEFAULT_TERM_S) -> None:
        self._store = store
        self.holder = holder
        self.term_s = term_s

    async def acquire(self, key: str, *, now: float) -> bool:
        current = await self._store.get_lease(key)
        if not may_take(current, holder=self.holder, now=now):
            return False
        record = taken(current, key=key, holder=self.holder, now=now, term_s=self.term_s)
        return await self._store.put_lease(record, create=current is None)


class LocalLeases:
    """One replica: every lease is this one's."""

    async def acquire(self, key: str, *, now: float) -> bool:
        return True


def leases_for(store: object, *, holder: str, term_s: float = DEFAULT_TERM_S) -> Leases:
    """Store leases where the store keeps them, else local ones (a store for one replica)."""
    if hasattr(store, "get_lease") and hasattr(store, "put_lease"):
        return StoreLeases(store, holder=holder, term_s=term_s)  # type: ignore[arg-type]
    return LocalLeases()


def watchdog_key(execution_id: str) -> str:
    return f"watchdog:{execution_id}"


def delivery_key(key: str) -> str:
    return f"delivery:{key}"
