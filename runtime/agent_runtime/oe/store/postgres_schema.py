"""The PostgreSQL store's schema: versioned migrations, applied at start under an advisory lock.

Each entry of `MIGRATIONS` moves the schema from version n to n + 1; `oe_schema_version` holds the version
applied. Several replicas starting at once serialize on one advisory lock, so each migration runs once. An
OE refuses a database whose schema is newer than it knows (a newer OE migrated it; rolling back would write
rows the newer OE does not expect).

Layout (why): every record's fields are kept as JSON text exactly as pydantic wrote them (numbers keep
their exact form, a NUL escaped as `\\u0000` stays text, which jsonb itself refuses). Executions and steps
keep them in a jsonb object of field name -> JSON text, so a change is one `fields || patch` in the same
statement as its compare-and-set, and a field added to the record later needs no migration; the few
columns that are compared or indexed (status, agent, created_at, a step's state) sit beside it.
"""

from __future__ import annotations

from agent_runtime.oe.store.postgres_ledger import LEDGER_MIGRATION
from agent_runtime.oe.store.postgres_sessions import SESSION_MIGRATION

SCHEMA_VERSION_TABLE = "oe_schema_version"
# An execution's parent execution id (ExecutionRecord.parent, a field kept as JSON text): the index's
# expression, which the store's query repeats exactly.
PARENT_ID = "(((fields ->> 'parent')::jsonb) ->> 'execution_id')"
# Any constant shared by every OE: the key of the advisory lock migrations run under.
MIGRATION_LOCK_KEY = 0x0E5C_4E3A

MIGRATIONS: tuple[str, ...] = (
    # 1: executions, steps, audit, claims, events, deliveries, served runtimes
    """
    CREATE TABLE executions (
        execution_id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        project_id TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        fields JSONB NOT NULL
    );
    CREATE INDEX executions_by_created ON executions (created_at DESC, execution_id DESC);
    CREATE INDEX executions_by_agent ON executions (agent, created_at DESC, execution_id DESC);
    CREATE INDEX executions_by_project ON executions (project_id, created_at DESC, execution_id DESC);
    CREATE INDEX executions_by_status ON executions (status, created_at DESC, execution_id DESC);
    CREATE TABLE steps (
        execution_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        state TEXT NOT NULL,
        outcome_status TEXT,
        fields JSONB NOT NULL,
        PRIMARY KEY (execution_id, step)
    );
    CREATE TABLE audit (
        id BIGSERIAL PRIMARY KEY,
        execution_id TEXT NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX audit_by_execution ON audit (execution_id, id);
    CREATE TABLE claims (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE event_seqs (
        execution_id TEXT PRIMARY KEY,
        seq INTEGER NOT NULL
    );
    CREATE TABLE events (
        execution_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (execution_id, seq)
    );
    CREATE TABLE deliveries (
        key TEXT PRIMARY KEY,
        open BOOLEAN NOT NULL,
        due DOUBLE PRECISION NOT NULL,
        version INTEGER NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX deliveries_by_due ON deliveries (due, key) WHERE open;
    CREATE TABLE served_runtimes (
        id BIGSERIAL,
        execution_id TEXT NOT NULL,
        component TEXT NOT NULL,
        address TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (execution_id, component, address)
    );
    """,
    # 2: leases: which replica looks after which execution's watchdog and drain work (oe/leases.py)
    """
    CREATE TABLE leases (
        key TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        version INTEGER NOT NULL
    );
    """,
    # 3: the audit's hash chain and its signed heads, usage counters, rate-limit slots (issue 34)
    LEDGER_MIGRATION,
    # 4: console sessions, shared by every replica (console/sessions.py, issue 30)
    SESSION_MIGRATION,
    # 5: an agentRef child's parent (issue 38): a parent's children are found without a scan
    f"CREATE INDEX executions_by_parent ON executions (({PARENT_ID}));",
)

SCHEMA_VERSION = len(MIGRATIONS)


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer OE; the message names both versions."""


def check_version(found: int, *, known: int = SCHEMA_VERSION) -> None:
    """Refuse a schema newer than this OE knows."""
    if found > known:
        raise SchemaTooNew(
            f"the OE's PostgreSQL schema is at version {found}, newer than version {known} that this OE "
            "knows: a newer OE migrated it; run that version (or newer) of the OE against this database"
        )


def pending(found: int) -> list[tuple[int, str]]:
    """The migrations still to apply after version `found`, as (version they produce, SQL)."""
    check_version(found)
    return [(number, MIGRATIONS[number - 1]) for number in range(found + 1, SCHEMA_VERSION + 1)]
