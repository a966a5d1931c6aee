"""`PostgresStore`'s audit chain, chain heads, usage counters and rate-limit slots (issue 34; mixed into it).

Tables from the schema's migration 3 (postgres_schema.py). A chained audit record's `seq` is also a column
under a unique (execution_id, seq) index: of two replicas appending at once, the loser links again after
the winner's record. Counters are one `INSERT ... ON CONFLICT DO UPDATE ... RETURNING` (atomic across
replicas); a rate slot is a unique (key, slot) row.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_runtime.audit_chain import link
from agent_runtime.oe.store.base import AuditRecord

if TYPE_CHECKING:
    import asyncpg

COUNTERS = ("steps", "model_calls", "tool_calls", "tokens", "cost")
_MAX_LINK_ATTEMPTS = 100

_LAST_LINK = "SELECT record FROM audit WHERE execution_id = $1 AND seq IS NOT NULL ORDER BY seq DESC LIMIT 1"
_INSERT_LINK = (
    "INSERT INTO audit (execution_id, seq, record) VALUES ($1, $2, $3) "
    "ON CONFLICT (execution_id, seq) WHERE seq IS NOT NULL DO NOTHING RETURNING id"
)
_SET_HEAD = (
    "INSERT INTO audit_heads (execution_id, seq, head) VALUES ($1, $2, $3) "
    "ON CONFLICT (execution_id) DO UPDATE SET seq = excluded.seq, head = excluded.head "
    "WHERE excluded.seq > audit_heads.seq"
)
_GET_HEAD = "SELECT head FROM audit_heads WHERE execution_id = $1"
_ADD_USAGE = (
    "INSERT INTO usage_counters AS u (key, steps, model_calls, tool_calls, tokens, cost, expires_at) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (key) DO UPDATE SET "
    "steps = u.steps + excluded.steps, model_calls = u.model_calls + excluded.model_calls, "
    "tool_calls = u.tool_calls + excluded.tool_calls, tokens = u.tokens + excluded.tokens, "
    "cost = u.cost + excluded.cost, expires_at = greatest(u.expires_at, excluded.expires_at) "
    "RETURNING steps, model_calls, tool_calls, tokens, cost"
)
_GET_USAGE = "SELECT steps, model_calls, tool_calls, tokens, cost FROM usage_counters WHERE key = $1"
_DROP_SLOTS = "DELETE FROM rate_slots WHERE key = $1 AND slot < $2"
_TAKEN_SLOTS = "SELECT slot FROM rate_slots WHERE key = $1 AND slot >= $2"
_TAKE_SLOT = (
    "INSERT INTO rate_slots (key, slot, expires_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING slot"
)

LEDGER_MIGRATION = """
    ALTER TABLE audit ADD COLUMN seq INTEGER;
    CREATE UNIQUE INDEX audit_chain ON audit (execution_id, seq) WHERE seq IS NOT NULL;
    CREATE TABLE audit_heads (
        execution_id TEXT PRIMARY KEY,
        seq INTEGER NOT NULL,
        head TEXT NOT NULL
    );
    CREATE TABLE usage_counters (
        key TEXT PRIMARY KEY,
        steps DOUBLE PRECISION NOT NULL DEFAULT 0,
        model_calls DOUBLE PRECISION NOT NULL DEFAULT 0,
        tool_calls DOUBLE PRECISION NOT NULL DEFAULT 0,
        tokens DOUBLE PRECISION NOT NULL DEFAULT 0,
        cost DOUBLE PRECISION NOT NULL DEFAULT 0,
        expires_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE rate_slots (
        key TEXT NOT NULL,
        slot BIGINT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (key, slot)
    );
    """


def _deltas(deltas: dict[str, float]) -> list[float]:
    unknown = set(deltas) - set(COUNTERS)
    if unknown:
        raise ValueError(f"unknown usage counters {sorted(unknown)}; the store keeps {', '.join(COUNTERS)}")
    return [float(deltas.get(name, 0)) for name in COUNTERS]


class PostgresLedger:
    """The issue-34 tables next to the store's others."""

    if TYPE_CHECKING:

        async def _execute(self, sql: str, *args: Any) -> str: ...

        async def _fetchval(self, sql: str, *args: Any) -> Any: ...

        async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]: ...

        async def _fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None: ...

    async def append_audit(self, record: AuditRecord) -> AuditRecord:
        payload = record.model_dump(mode="json")
        for _ in range(_MAX_LINK_ATTEMPTS):
            last = await self._fetchval(_LAST_LINK, record.execution_id)
            linked = link(payload, previous=json.loads(last) if last else None)
            text = json.dumps(linked, separators=(",", ":"))
            if await self._fetchval(_INSERT_LINK, record.execution_id, linked["seq"], text) is not None:
                return AuditRecord.model_validate(linked)
        raise RuntimeError(f"could not append to the audit of {record.execution_id}")

    async def set_audit_head(self, execution_id: str, head: dict[str, Any]) -> None:
        text = json.dumps(head, separators=(",", ":"), sort_keys=True)
        await self._execute(_SET_HEAD, execution_id, int(head["seq"]), text)

    async def get_audit_head(self, execution_id: str) -> dict[str, Any] | None:
        text = await self._fetchval(_GET_HEAD, execution_id)
        return None if text is None else dict(json.loads(text))

    async def add_usage(self, key: str, deltas: dict[str, float], *, expires_at: float) -> dict[str, float]:
        row = await self._fetchrow(_ADD_USAGE, key, *_deltas(deltas), float(expires_at))
        assert row is not None
        return {name: float(row[name]) for name in COUNTERS}

    async def get_usage(self, key: str) -> dict[str, float]:
        row = await self._fetchrow(_GET_USAGE, key)
        return {} if row is None else {name: float(row[name]) for name in COUNTERS}

    async def take_rate_slot(self, key: str, slots: list[int], *, expires_at: float) -> int | None:
        if not slots:
            return None
        lowest = min(slots)
        await self._execute(_DROP_SLOTS, key, lowest)
        taken = {row["slot"] for row in await self._fetch(_TAKEN_SLOTS, key, lowest)}
        for slot in slots:
            if slot in taken:
                continue
            if await self._fetchval(_TAKE_SLOT, key, slot, float(expires_at)) is not None:
                return slot
        return None
