"""The Memory server's stores: the interface, SQLite (default) and MongoDB, and the choice between them."""

from __future__ import annotations

import re
from collections.abc import Mapping

from agent_runtime.memory.store.base import MemoryStore
from agent_runtime.memory.store.uri import redact_uri

__all__ = ["DEFAULT_MONGODB_DATABASE", "MemoryStore", "open_store", "redact_uri"]

STORE_TYPE_ENV = "MEMORY_STORE_TYPE"
SQLITE_PATH_ENV = "MEMORY_SQLITE_PATH"
MONGODB_URI_ENV = "MEMORY_MONGODB_URI"
MONGODB_DATABASE_ENV = "MEMORY_MONGODB_DATABASE"
STORE_TYPES = ("sqlite", "mongodb")
DEFAULT_SQLITE_PATH = "/var/lib/agent-engine/memory/memory.db"
DEFAULT_MONGODB_DATABASE = "agent_memory"
# MongoDB's own rule for database names (and FerretDB's, which is stricter on length).
_DATABASE_NAME = re.compile(r"[A-Za-z0-9_-]{1,63}")


def open_store(env: Mapping[str, str]) -> MemoryStore:
    """The store the settings name (M-02), not opened yet; a ValueError names the variable to fix."""
    kind = env.get(STORE_TYPE_ENV, "").strip().lower() or "sqlite"
    if kind == "sqlite":
        from agent_runtime.memory.store.sqlite import SqliteStore

        path = env.get(SQLITE_PATH_ENV, "").strip()
        if not path:
            raise ValueError(
                f"{STORE_TYPE_ENV}=sqlite (the default) needs {SQLITE_PATH_ENV}: the database file, "
                f"e.g. {DEFAULT_SQLITE_PATH} (the operator sets it)"
            )
        return SqliteStore(path)
    if kind == "mongodb":
        from agent_runtime.memory.store.mongo import MongoStore

        uri = env.get(MONGODB_URI_ENV, "").strip()
        if not uri:
            raise ValueError(
                f"{STORE_TYPE_ENV}=mongodb needs {MONGODB_URI_ENV}, e.g. mongodb://user:password@host:27017/ "
                "(the operator sets it from spec.components.memory.store.uriSecretRef)"
            )
        if not uri.startswith(("mongodb://", "mongodb+srv://")):
            raise ValueError(
                f"{MONGODB_URI_ENV} must start with mongodb:// or mongodb+srv://, got {redact_uri(uri)!r}"
            )
        database = env.get(MONGODB_DATABASE_ENV, "").strip() or DEFAULT_MONGODB_DATABASE
        if not _DATABASE_NAME.fullmatch(database):
            raise ValueError(
                f"{MONGODB_DATABASE_ENV} must be 1 to 63 letters, digits, '_' or '-', got {database!r}"
            )
        return MongoStore(uri, database)
    raise ValueError(f"{STORE_TYPE_ENV} must be one of {', '.join(STORE_TYPES)}, got {kind!r}")
