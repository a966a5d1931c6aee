"""The Memory server's store interface; SQLite and MongoDB implement it and pass one shared suite
(tests/integration/memory/test_store.py).

A store keeps records and their vectors and answers exact nearest-neighbour queries inside one partition
(kind, Agent, org, user) and namespace selector; it never reads across partitions. Filters arrive as a
compiled predicate over a record's metadata (`memory.filters`), so both stores mean the same by them.
"""

from __future__ import annotations

from typing import Protocol

from agent_runtime.memory.filters import Predicate
from agent_runtime.memory.records import MemoryRecord, NamespaceSelector, Partition
from agent_runtime.memory.vectors import Vector


class MemoryStore(Protocol):
    """Durable records: every write is committed when the call returns."""

    async def open(self) -> None:
        """Connect and create tables or indexes; idempotent."""

    async def close(self) -> None: ...

    async def put(
        self, record: MemoryRecord, vector: Vector | None, *, keep_vector: bool = False
    ) -> MemoryRecord | None:
        """Insert or replace the record with its key; the record it replaced (None: created), whose
        `created_at` the new one keeps. The new record has `vector` (normalized, in the space of
        `record.embedding_model`) or none, unless `keep_vector` keeps the replaced record's vector (a
        change of metadata or place only)."""

    async def get(self, partition: Partition, namespace: str, record_id: str) -> MemoryRecord | None: ...

    async def delete(self, partition: Partition, namespace: str, record_ids: list[str]) -> int:
        """Delete records by id; how many there were."""

    async def list_records(
        self,
        partition: Partition,
        selector: NamespaceSelector,
        *,
        session_id: str | None = None,
        since: float | None = None,
        until: float | None = None,
        descending: bool = True,
        limit: int,
        offset: int = 0,
        keep: Predicate | None = None,
    ) -> list[MemoryRecord]:
        """Records in time order (episodic: `occurred_at`, others: `updated_at`; then id), `since` <= t <
        `until`; `keep` filters on metadata before `offset` and `limit` apply."""

    async def nearest(
        self,
        partition: Partition,
        selector: NamespaceSelector,
        *,
        model: str,
        query: Vector,
        limit: int,
        keep: Predicate | None = None,
        session_id: str | None = None,
    ) -> list[tuple[MemoryRecord, float]]:
        """The `limit` records with vectors in `model`'s space closest (cosine) to `query`, best first."""

    async def namespaces(
        self, partition: Partition, *, prefix: str | None, limit: int, offset: int = 0
    ) -> list[str]:
        """Namespaces holding at least one record, sorted; with `prefix`, it and those below it."""

    async def count(self, partition: Partition | None = None) -> int:
        """Records in one partition, or in the whole store."""
