"""Where checkpoints live: the store, the MongoDB database name and the project scope (CP-01..CP-04, LG-04).

| env | default | meaning |
|---|---|---|
| `CHECKPOINT_STORE` | `mongodb` with `MONGODB_URI`, else `sqlite` | `mongodb`, `sqlite` or `memory` |
| `MONGODB_URI` | unset | the MongoDB the AER keeps checkpoints in (its only credential, Decision 9) |
| `MDB_AGENTIC_STORE_DB` | `mdb_store` | base name of the per-project database: `<base>_<project>` |
| `CHECKPOINT_DB_NAME` | unset | the exact database name: no project scoping |
| `CHECKPOINT_SQLITE_PATH` | `<temp dir>/agent-engine/checkpoints.sqlite3` | the SQLite file (local, dev) |

The project is the namespace part of `APP_ID` (`<namespace>.<agent>`, Decision 1). A managed runtime
(`REQUIRE_PROJECT_SCOPED_DB=true`) without `APP_ID` fails closed: every read and save raises.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agent_runtime.contract import APP_ID_ENV, REQUIRE_PROJECT_SCOPED_DB_ENV

CHECKPOINT_STORE_ENV = "CHECKPOINT_STORE"
MONGODB_URI_ENV = "MONGODB_URI"
STORE_DB_ENV = "MDB_AGENTIC_STORE_DB"
CHECKPOINT_DB_NAME_ENV = "CHECKPOINT_DB_NAME"
CHECKPOINT_SQLITE_PATH_ENV = "CHECKPOINT_SQLITE_PATH"
DEFAULT_STORE_DB = "mdb_store"
# MongoDB refuses database names of 64 bytes or more.
MAX_DB_NAME_BYTES = 63
_DB_NAME_FORBIDDEN = re.compile(r'[/\\. "$*<>:|?\x00]')
_TRUE = frozenset({"1", "true", "yes", "on"})

StoreKind = Literal["mongodb", "sqlite", "memory"]


class CheckpointConfigError(ValueError):
    """The checkpoint settings are unusable; the message names the variable and the fix."""


class CheckpointScopeError(RuntimeError):
    """A managed runtime without APP_ID: checkpoint reads and saves fail closed (CP-04)."""


@dataclass(frozen=True)
class CheckpointSettings:
    """The resolved settings of one process. `refusal` is set when every read and save must fail."""

    store: StoreKind
    mongodb_uri: str | None = field(default=None, repr=False)  # may hold a password: never printed
    db_name: str | None = None
    sqlite_path: Path | None = None
    refusal: str | None = None


def is_managed(env: Mapping[str, str]) -> bool:
    return env.get(REQUIRE_PROJECT_SCOPED_DB_ENV, "").strip().lower() in _TRUE


def scope_refusal(env: Mapping[str, str]) -> str | None:
    """Why checkpoints must fail closed here, or None (CP-04)."""
    if is_managed(env) and not env.get(APP_ID_ENV, "").strip():
        return (
            f"{REQUIRE_PROJECT_SCOPED_DB_ENV} is set but {APP_ID_ENV} is not: checkpoint reads and saves are "
            f"refused rather than trusting the request's workspace; the operator renders {APP_ID_ENV}="
            "<namespace>.<agent> into the AER, set it when running the AER by hand"
        )
    return None


def project_scope(app_id: str) -> str:
    """The project part of APP_ID (`<namespace>.<agent>`), as database-name characters."""
    project = app_id.split(".", 1)[0]
    return re.sub(r"[^A-Za-z0-9_]", "_", project)


def mongo_db_name(env: Mapping[str, str]) -> str:
    """CHECKPOINT_DB_NAME verbatim, else `<MDB_AGENTIC_STORE_DB or mdb_store>_<project>` (CP-03)."""
    exact = env.get(CHECKPOINT_DB_NAME_ENV, "").strip()
    if exact:
        return _checked_db_name(exact, source=CHECKPOINT_DB_NAME_ENV)
    base = env.get(STORE_DB_ENV, "").strip() or DEFAULT_STORE_DB
    app_id = env.get(APP_ID_ENV, "").strip()
    name = f"{base}_{project_scope(app_id)}" if app_id else base
    return _checked_db_name(name, source=f"{STORE_DB_ENV} with the project from {APP_ID_ENV}")


def _checked_db_name(name: str, *, source: str) -> str:
    if _DB_NAME_FORBIDDEN.search(name):
        raise CheckpointConfigError(
            f"the checkpoint database name from {source} has a character MongoDB refuses "
            '(/ \\ . space " $ * < > : | ?); use letters, digits, - and _'
        )
    if len(name.encode()) > MAX_DB_NAME_BYTES:
        raise CheckpointConfigError(
            f"the checkpoint database name from {source} is {len(name.encode())} bytes; MongoDB allows "
            f"{MAX_DB_NAME_BYTES}: shorten {STORE_DB_ENV} or set {CHECKPOINT_DB_NAME_ENV}"
        )
    return name


def default_sqlite_path() -> Path:
    return Path(tempfile.gettempdir()) / "agent-engine" / "checkpoints.sqlite3"


def checkpoint_settings(env: Mapping[str, str] | None = None) -> CheckpointSettings:
    """The settings from the environment; CheckpointConfigError names a bad variable."""
    env = os.environ if env is None else env
    uri = env.get(MONGODB_URI_ENV, "").strip() or None
    store = env.get(CHECKPOINT_STORE_ENV, "").strip().lower() or ("mongodb" if uri else "sqlite")
    refusal = scope_refusal(env)
    if store == "mongodb":
        if uri is None:
            raise CheckpointConfigError(
                f"{CHECKPOINT_STORE_ENV}=mongodb needs {MONGODB_URI_ENV}: the MongoDB connection string "
                "(give it to the AER through a Secret)"
            )
        if not uri.startswith(("mongodb://", "mongodb+srv://")):
            raise CheckpointConfigError(f"{MONGODB_URI_ENV} must start with mongodb:// or mongodb+srv://")
        db_name = mongo_db_name(env)
        return CheckpointSettings(store="mongodb", mongodb_uri=uri, db_name=db_name, refusal=refusal)
    if store == "sqlite":
        raw = env.get(CHECKPOINT_SQLITE_PATH_ENV, "").strip()
        return CheckpointSettings(
            store="sqlite", sqlite_path=Path(raw) if raw else default_sqlite_path(), refusal=refusal
        )
    if store == "memory":
        return CheckpointSettings(store="memory", refusal=refusal)
    raise CheckpointConfigError(f"{CHECKPOINT_STORE_ENV}={store!r}: use mongodb, sqlite or memory")
