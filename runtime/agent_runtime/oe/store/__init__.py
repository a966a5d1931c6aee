"""The OE's durable store: the `Store` interface, its records, the SQLite and MongoDB backends."""

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
from agent_runtime.oe.store.sqlite import SqliteStore

__all__ = [
    "AuditRecord",
    "DeliveryRecord",
    "DeliveryTarget",
    "EventRecord",
    "ExecutionRecord",
    "MongoStore",
    "Page",
    "Review",
    "ServedRuntime",
    "SqliteStore",
    "StepRecord",
    "StepState",
    "Store",
    "drain_key",
    "interrupt_key",
    "open_store",
]

STORE_TYPES = ("sqlite", "mongodb")
# MongoDB's own rule for database names (and FerretDB's, which is stricter on length).
_DATABASE_NAME = re.compile(r"[A-Za-z0-9_-]{1,63}")


def open_store(
    *, store_type: str, sqlite_path: str | None, mongodb_uri: str | None, mongodb_database: str
) -> Store:
    """The store the settings name, not opened yet (`await store.open()`); a ValueError names what to fix.

    Settings: `OE_STORE_TYPE` (sqlite | mongodb), `OE_SQLITE_PATH`, `OE_MONGODB_URI`, `OE_MONGODB_DATABASE`.
    """
    kind = (store_type or "").strip().lower()
    if kind == "sqlite":
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
        return MongoStore(uri, database)
    raise ValueError(f"OE_STORE_TYPE must be one of {', '.join(STORE_TYPES)}, got {store_type!r}")
