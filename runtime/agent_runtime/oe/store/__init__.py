"""The OE's durable store: the `Store` interface, its records, the SQLite, MongoDB and PostgreSQL backends."""

from __future__ import annotations

import re

from agent_runtime.oe.store.base import (
    AuditRecord,
    EventRecord,
    ExecutionRecord,
    Page,
    Review,
    StepRecord,
    StepState,
    Store,
)
from agent_runtime.oe.store.codec import redact_uri
from agent_runtime.oe.store.deliveries import (
    DeliveryRecord,
    DeliveryTarget,
    ServedRuntime,
    drain_key,
    interrupt_key,
)
from agent_runtime.oe.store.mongo import MongoStore
from agent_runtime.oe.store.postgres import PostgresStore
from agent_runtime.oe.store.sqlite import SqliteStore
from agent_runtime.oe.store.unavailable import StoreUnavailable

__all__ = [
    "AuditRecord",
    "DeliveryRecord",
    "DeliveryTarget",
    "EventRecord",
    "ExecutionRecord",
    "MongoStore",
    "Page",
    "PostgresStore",
    "Review",
    "ServedRuntime",
    "SqliteStore",
    "StepRecord",
    "StepState",
    "Store",
    "StoreUnavailable",
    "drain_key",
    "interrupt_key",
    "open_store",
]

STORE_TYPES = ("sqlite", "mongodb", "postgres")
# MongoDB's own rule for database names (and FerretDB's, which is stricter on length).
_DATABASE_NAME = re.compile(r"[A-Za-z0-9_-]{1,63}")


def open_store(
    *,
    store_type: str,
    sqlite_path: str | None,
    mongodb_uri: str | None,
    mongodb_database: str,
    postgres_url: str | None = None,
    postgres_pool_size: int = 10,
    postgres_statement_timeout_s: float = 10.0,
    replicas: int = 1,
) -> Store:
    """The store the settings name, not opened yet (`await store.open()`); a ValueError names what to fix.

    Settings: `OE_STORE_TYPE` (sqlite | mongodb | postgres), `OE_SQLITE_PATH`, `OE_MONGODB_URI`,
    `OE_MONGODB_DATABASE`, `OE_POSTGRES_URL`, `OE_POSTGRES_POOL_SIZE`, `OE_POSTGRES_STATEMENT_TIMEOUT_S`,
    and `OE_REPLICAS` (how many OEs share the store: SQLite takes one, FerretDB v1 one).
    """
    kind = (store_type or "").strip().lower()
    if kind == "sqlite":
        if replicas > 1:
            raise ValueError(
                f"OE_REPLICAS={replicas} with OE_STORE_TYPE=sqlite: the SQLite store is one file for one OE; "
                "set OE_STORE_TYPE=postgres for several replicas"
            )
        if not sqlite_path or not sqlite_path.strip():
            raise ValueError("OE_STORE_TYPE=sqlite needs OE_SQLITE_PATH: the database file, e.g. /data/oe.db")
        return SqliteStore(sqlite_path.strip())
    if kind == "mongodb":
        uri = (mongodb_uri or "").strip()
        if not uri:
            raise ValueError(
                "OE_STORE_TYPE=mongodb needs OE_MONGODB_URI, e.g. mongodb://user:password@host:27017/"
            )
        if not uri.startswith(("mongodb://", "mongodb+srv://")):
            raise ValueError(
                f"OE_MONGODB_URI must start with mongodb:// or mongodb+srv://, got {redact_uri(uri)!r}"
            )
        database = (mongodb_database or "").strip()
        if not _DATABASE_NAME.fullmatch(database):
            raise ValueError(
                f"OE_MONGODB_DATABASE must be 1 to 63 letters, digits, '_' or '-', got {mongodb_database!r}"
            )
        return MongoStore(uri, database, replicas=replicas)
    if kind == "postgres":
        url = (postgres_url or "").strip()
        if not url:
            raise ValueError(
                "OE_STORE_TYPE=postgres needs OE_POSTGRES_URL, e.g. postgresql://user:password@host:5432/oe"
            )
        if not url.startswith(("postgresql://", "postgres://")):
            raise ValueError(
                f"OE_POSTGRES_URL must start with postgresql:// or postgres://, got {redact_uri(url)!r}"
            )
        if postgres_pool_size < 1:
            raise ValueError(f"OE_POSTGRES_POOL_SIZE must be at least 1, got {postgres_pool_size}")
        return PostgresStore(
            url, pool_size=postgres_pool_size, statement_timeout_s=postgres_statement_timeout_s
        )
    raise ValueError(f"OE_STORE_TYPE must be one of {', '.join(STORE_TYPES)}, got {store_type!r}")
