"""`SqliteStore`'s audit chain heads, usage counters and rate-limit slots (issue 34; mixed into it, runs on
its worker thread). The audit records themselves stay in the `audit` table: a unique index on
(execution_id, seq) makes two OE processes on one file link one after the other."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agent_runtime.audit_chain import link
from agent_runtime.oe.store.base import AuditRecord

T = TypeVar("T")

COUNTERS = ("steps", "model_calls", "tool_calls", "tokens", "cost")
_MAX_LINK_ATTEMPTS = 100

LEDGER_SCHEMA = """
CREATE UNIQUE INDEX IF NOT EXISTS audit_chain ON audit (execution_id, json_extract(record, '$.seq'))
    WHERE json_extract(record, '$.seq') IS NOT NULL;
CREATE TABLE IF NOT EXISTS audit_heads (
    execution_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    head TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS usage_counters (
    key TEXT PRIMARY KEY,
    steps REAL NOT NULL DEFAULT 0,
    model_calls REAL NOT NULL DEFAULT 0,
    tool_calls REAL NOT NULL DEFAULT 0,
    tokens REAL NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS rate_slots (
    key TEXT NOT NULL,
    slot INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (key, slot)
);
"""

_LAST_LINK = (
    "SELECT record FROM audit WHERE execution_id = ? AND json_extract(record, '$.seq') IS NOT NULL "
    "ORDER BY json_extract(record, '$.seq') DESC LIMIT 1"
)
_INSERT_AUDIT = "INSERT INTO audit (execution_id, record) VALUES (?, ?)"
_SET_HEAD = (
    "INSERT INTO audit_heads (execution_id, seq, head) VALUES (?, ?, ?) "
    "ON CONFLICT (execution_id) DO UPDATE SET seq = excluded.seq, head = excluded.head "
    "WHERE excluded.seq > audit_heads.seq"
)
_GET_HEAD = "SELECT head FROM audit_heads WHERE execution_id = ?"
# One statement: two processes adding at once both count.
_ADD_USAGE = (
    "INSERT INTO usage_counters (key, steps, model_calls, tool_calls, tokens, cost, expires_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
    "steps = steps + excluded.steps, model_calls = model_calls + excluded.model_calls, "
    "tool_calls = tool_calls + excluded.tool_calls, tokens = tokens + excluded.tokens, "
    "cost = cost + excluded.cost, expires_at = max(expires_at, excluded.expires_at) "
    "RETURNING steps, model_calls, tool_calls, tokens, cost"
)
_GET_USAGE = "SELECT steps, model_calls, tool_calls, tokens, cost FROM usage_counters WHERE key = ?"
_TAKEN_SLOTS = "SELECT slot FROM rate_slots WHERE key = ? AND slot >= ?"
_TAKE_SLOT = "INSERT INTO rate_slots (key, slot, expires_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
_DROP_SLOTS = "DELETE FROM rate_slots WHERE key = ? AND slot < ?"


def _deltas(deltas: dict[str, float]) -> list[float]:
    unknown = set(deltas) - set(COUNTERS)
    if unknown:
        raise ValueError(f"unknown usage counters {sorted(unknown)}; the store keeps {', '.join(COUNTERS)}")
    return [float(deltas.get(name, 0)) for name in COUNTERS]


class SqliteLedger:
    """The issue-34 tables in the store's file."""

    if TYPE_CHECKING:

        async def _run(self, fn: Callable[..., T], *args: Any) -> T: ...

        def _db(self) -> sqlite3.Connection: ...

        def _execute(self, sql: str, params: tuple[Any, ...]) -> int: ...

        def _fetchone(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None: ...

    async def append_audit(self, record: AuditRecord) -> AuditRecord:
        linked = await self._run(self._append_audit, record.execution_id, record.model_dump(mode="json"))
        return AuditRecord.model_validate(linked)

    def _append_audit(self, execution_id: str, payload: dict[str, Any]) -> dict[str, Any]:
        db = self._db()
        for _ in range(_MAX_LINK_ATTEMPTS):
            row = db.execute(_LAST_LINK, (execution_id,)).fetchone()
            linked = link(payload, previous=json.loads(row[0]) if row else None)
            try:
                db.execute(_INSERT_AUDIT, (execution_id, json.dumps(linked, separators=(",", ":"))))
            except sqlite3.IntegrityError:
                continue  # another process linked this seq first: link after its record
            return linked
        raise RuntimeError(
            f"could not append to the audit of {execution_id} after {_MAX_LINK_ATTEMPTS} tries"
        )

    async def set_audit_head(self, execution_id: str, head: dict[str, Any]) -> None:
        text = json.dumps(head, separators=(",", ":"), sort_keys=True)
        await self._run(self._execute, _SET_HEAD, (execution_id, int(head["seq"]), text))

    async def get_audit_head(self, execution_id: str) -> dict[str, Any] | None:
        row = await self._run(self._fetchone, _GET_HEAD, (execution_id,))
        return None if row is None else dict(json.loads(row[0]))

    async def add_usage(self, key: str, deltas: dict[str, float], *, expires_at: float) -> dict[str, float]:
        row = await self._run(self._fetchone, _ADD_USAGE, (key, *_deltas(deltas), float(expires_at)))
        assert row is not None
        return dict(zip(COUNTERS, (float(value) for value in row), strict=True))

    async def get_usage(self, key: str) -> dict[str, float]:
        row = await self._run(self._fetchone, _GET_USAGE, (key,))
        return {} if row is None else dict(zip(COUNTERS, (float(value) for value in row), strict=True))

    async def take_rate_slot(self, key: str, slots: list[int], *, expires_at: float) -> int | None:
        return await self._run(self._take_rate_slot, key, list(slots), float(expires_at))

    def _take_rate_slot(self, key: str, slots: list[int], expires_at: float) -> int | None:
        if not slots:
            return None
        db = self._db()
        lowest = min(slots)
        db.execute(_DROP_SLOTS, (key, lowest))
        taken = {row[0] for row in db.execute(_TAKEN_SLOTS, (key, lowest)).fetchall()}
        for slot in slots:
            if slot in taken:
                continue
            if db.execute(_TAKE_SLOT, (key, slot, expires_at)).rowcount == 1:
                return slot
        return None
