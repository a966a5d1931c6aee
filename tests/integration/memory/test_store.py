"""The one suite every Memory store passes (SQLite in a temp dir, MongoDB wire protocol on FerretDB)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from agent_runtime.memory.filters import compile_filter
from agent_runtime.memory.records import MemoryRecord, NamespaceSelector, Partition
from agent_runtime.memory.store.base import MemoryStore
from agent_runtime.memory.store.sqlite import SqliteStore
from agent_runtime.memory.vectors import Vector, normalized
from agent_runtime.memory.wire import Kind
from tests.integration.stores import Backend

T0 = 1_760_000_000.123456
WS = "team-a.echo"
P = Partition(Kind.SEMANTIC, WS, "org-1", "user-1")
MODEL = "test-model"


def record(
    record_id: str,
    *,
    partition: Partition = P,
    namespace: str = "notes",
    at: float = T0,
    content: str = "",
    metadata: dict[str, Any] | None = None,
    model: str | None = MODEL,
    **extra: Any,
) -> MemoryRecord:
    return MemoryRecord(
        id=record_id,
        kind=partition.kind,
        workspace_id=partition.workspace_id,
        org_id=partition.org_id,
        user_id=partition.user_id,
        namespace=namespace,
        content=content or f"content of {record_id}",
        metadata=metadata or {},
        created_at=at,
        updated_at=at,
        embedding_model=model,
        **extra,
    )


def vec(*values: float) -> Vector:
    return normalized(values)


def ids(found: list[Any]) -> list[str]:
    return [item[0].id if isinstance(item, tuple) else item.id for item in found]


def test_put_get_replace_round_trip(backend: Backend) -> None:
    meta = {"$ref": "x", "a.b": [1, 2.5, None], "nested": {"ü": "你好"}}
    first = record("r-1", content="¿qué tal? 你好", metadata=meta)
    second = record("r-1", content="replaced", at=T0 + 5)

    async def scenario(store: MemoryStore) -> None:
        assert await store.get(P, "notes", "r-1") is None
        assert await store.put(first, vec(1, 0, 0)) is None
        assert await store.get(P, "notes", "r-1") == first
        assert await store.put(second, None) == first
        # The replacement keeps the time the record was first written.
        assert await store.get(P, "notes", "r-1") == second.model_copy(update={"created_at": T0})
        assert await store.count(P) == 1
        assert await store.count() == 1

    backend.run(scenario)


@pytest.mark.parametrize(
    "other",
    [
        Partition(Kind.SEMANTIC, "team-b.other", "org-1", "user-1"),
        Partition(Kind.SEMANTIC, WS, "org-2", "user-1"),
        Partition(Kind.SEMANTIC, WS, "org-1", "user-2"),
        Partition(Kind.EPISODIC, WS, "org-1", "user-1"),
    ],
)
def test_no_read_or_delete_across_partitions(backend: Backend, other: Partition) -> None:
    async def scenario(store: MemoryStore) -> None:
        await store.put(record("r-1", metadata={"k": 1}), vec(1, 0))
        assert await store.get(other, "notes", "r-1") is None
        assert await store.get(P, "other-namespace", "r-1") is None
        assert await store.delete(other, "notes", ["r-1"]) == 0
        assert await store.list_records(other, NamespaceSelector("notes"), limit=10) == []
        assert (
            await store.nearest(other, NamespaceSelector("notes"), model=MODEL, query=vec(1, 0), limit=5)
            == []
        )
        assert await store.namespaces(other, prefix=None, limit=10) == []
        assert await store.count(other) == 0
        assert await store.get(P, "notes", "r-1") is not None

    backend.run(scenario)


def test_delete_is_by_id_and_counts(backend: Backend) -> None:
    async def scenario(store: MemoryStore) -> None:
        for i in range(3):
            await store.put(record(f"r-{i}"), vec(1, i))
        assert await store.delete(P, "notes", ["r-0", "r-2", "absent"]) == 2
        assert await store.delete(P, "notes", ["r-0"]) == 0
        assert ids(await store.list_records(P, NamespaceSelector("notes"), limit=10)) == ["r-1"]
        found = await store.nearest(P, NamespaceSelector("notes"), model=MODEL, query=vec(1, 0), limit=5)
        assert ids(found) == ["r-1"]

    backend.run(scenario)


def test_list_order_window_limit_offset_and_filter(backend: Backend) -> None:
    async def scenario(store: MemoryStore) -> None:
        for i in range(6):
            await store.put(record(f"r-{i}", at=T0 + i, metadata={"even": i % 2 == 0, "i": i}), None)
        sel = NamespaceSelector("notes")
        assert ids(await store.list_records(P, sel, limit=3)) == ["r-5", "r-4", "r-3"]
        assert ids(await store.list_records(P, sel, limit=2, offset=1, descending=False)) == ["r-1", "r-2"]
        window = await store.list_records(P, sel, since=T0 + 1, until=T0 + 4, limit=10, descending=False)
        assert ids(window) == ["r-1", "r-2", "r-3"]
        keep = compile_filter({"even": True})
        assert ids(await store.list_records(P, sel, limit=2, offset=1, keep=keep)) == ["r-2", "r-0"]

    backend.run(scenario)


def test_episodes_sort_by_occurrence_and_filter_by_session(backend: Backend) -> None:
    part = Partition(Kind.EPISODIC, WS, "org-1", "user-1")

    async def scenario(store: MemoryStore) -> None:
        # Written in reverse: they must come back in the order they happened.
        for i in reversed(range(4)):
            session = "s-1" if i < 3 else "s-2"
            episode = record(f"e-{i}", partition=part, at=T0 + 100, occurred_at=T0 + i, session_id=session)
            await store.put(episode, vec(1, i))
        sel = NamespaceSelector("notes")
        assert ids(await store.list_records(part, sel, session_id="s-1", limit=10, descending=False)) == [
            "e-0",
            "e-1",
            "e-2",
        ]
        found = await store.nearest(part, sel, model=MODEL, query=vec(1, 3), limit=5, session_id="s-1")
        assert ids(found) == ["e-2", "e-1", "e-0"]

    backend.run(scenario)


def test_namespace_prefix_covers_whole_segments_only(backend: Backend) -> None:
    names = ["a", "a.b", "a.b.c", "ab", "a-b", "b", "a.bc"]

    async def scenario(store: MemoryStore) -> None:
        for i, ns in enumerate(names):
            await store.put(record(f"r-{i}", namespace=ns), vec(1, i / 10))
        under_a = await store.list_records(P, NamespaceSelector("a", prefix=True), limit=20)
        assert sorted(r.namespace for r in under_a) == ["a", "a.b", "a.b.c", "a.bc"]
        under_ab = await store.list_records(P, NamespaceSelector("a.b", prefix=True), limit=20)
        assert sorted(r.namespace for r in under_ab) == ["a.b", "a.b.c"]
        near = await store.nearest(
            P, NamespaceSelector("a.b", prefix=True), model=MODEL, query=vec(1, 0), limit=9
        )
        assert sorted(r.namespace for r, _ in near) == ["a.b", "a.b.c"]
        assert await store.namespaces(P, prefix=None, limit=100) == sorted(names)
        assert await store.namespaces(P, prefix="a", limit=100) == ["a", "a.b", "a.b.c", "a.bc"]
        assert await store.namespaces(P, prefix="a", limit=2, offset=1) == ["a.b", "a.b.c"]

    backend.run(scenario)


def test_nearest_ranks_by_cosine_within_model_and_dimension(backend: Backend) -> None:
    async def scenario(store: MemoryStore) -> None:
        await store.put(record("east"), vec(1, 0, 0))
        await store.put(record("north-east"), vec(1, 1, 0))
        await store.put(record("north"), vec(0, 1, 0))
        await store.put(record("west"), vec(-1, 0, 0))
        await store.put(record("other-model", model="another"), vec(1, 0, 0))
        await store.put(record("other-dim"), vec(1, 0))
        await store.put(record("no-vector", model=None), None)
        sel = NamespaceSelector("notes")
        found = await store.nearest(P, sel, model=MODEL, query=vec(1, 0.2, 0), limit=10)
        assert ids(found) == ["east", "north-east", "north", "west"]
        scores = [score for _, score in found]
        assert scores == sorted(scores, reverse=True)
        assert scores[0] == pytest.approx(float(vec(1, 0.2, 0) @ vec(1, 0, 0)), abs=1e-5)
        assert ids(await store.nearest(P, sel, model=MODEL, query=vec(1, 0.2, 0), limit=2)) == [
            "east",
            "north-east",
        ]
        assert ids(await store.nearest(P, sel, model="another", query=vec(0, 1, 0), limit=5)) == [
            "other-model"
        ]

    backend.run(scenario)


def test_nearest_filters_then_limits(backend: Backend) -> None:
    async def scenario(store: MemoryStore) -> None:
        for i in range(20):
            await store.put(
                record(f"r-{i:02}", metadata={"tag": "keep" if i % 5 == 0 else "drop"}), vec(1, i)
            )
        keep = compile_filter({"tag": "keep"})
        found = await store.nearest(
            P, NamespaceSelector("notes"), model=MODEL, query=vec(1, 0), limit=3, keep=keep
        )
        assert ids(found) == ["r-00", "r-05", "r-10"]

    backend.run(scenario)


def test_replacing_a_record_replaces_its_vector_unless_kept(backend: Backend) -> None:
    async def scenario(store: MemoryStore) -> None:
        sel = NamespaceSelector("notes")
        await store.put(record("a"), vec(1, 0))
        await store.put(record("b"), vec(0.9, 0.1))
        assert ids(await store.nearest(P, sel, model=MODEL, query=vec(1, 0), limit=1)) == ["a"]
        await store.put(record("a"), vec(0, 1))
        assert ids(await store.nearest(P, sel, model=MODEL, query=vec(1, 0), limit=1)) == ["b"]
        await store.put(record("a", metadata={"moved": True}), None, keep_vector=True)
        found = await store.nearest(P, sel, model=MODEL, query=vec(0, 1), limit=1)
        assert ids(found) == ["a"] and found[0][0].metadata == {"moved": True}
        await store.put(record("a", model=None), None)
        assert ids(await store.nearest(P, sel, model=MODEL, query=vec(0, 1), limit=5)) == ["b"]

    backend.run(scenario)


def test_a_new_store_on_the_same_data_sees_everything(backend: Backend) -> None:
    async def write(store: MemoryStore) -> None:
        await store.put(record("kept", metadata={"n": 1}), vec(1, 2, 3))

    async def read(store: MemoryStore) -> None:
        assert (await store.get(P, "notes", "kept")) == record("kept", metadata={"n": 1})
        found = await store.nearest(P, NamespaceSelector("notes"), model=MODEL, query=vec(1, 2, 3), limit=1)
        assert ids(found) == ["kept"] and found[0][1] == pytest.approx(1.0, abs=1e-5)

    backend.run(write)
    backend.run(read)


def test_searches_see_another_replicas_writes(backend: Backend) -> None:
    """Two stores on the same data (two processes, two replicas) never serve each other stale vectors."""

    async def scenario() -> None:
        first, second = backend.make(), backend.make()
        await first.open()
        await second.open()
        try:
            sel = NamespaceSelector("notes")
            await first.put(record("a"), vec(1, 0))
            await second.put(record("c"), vec(1, 1))
            assert ids(await first.nearest(P, sel, model=MODEL, query=vec(0, 1), limit=5)) == ["c", "a"]
            assert ids(await second.nearest(P, sel, model=MODEL, query=vec(0, 1), limit=5)) == ["c", "a"]
            await second.put(record("b"), vec(0, 1))
            await second.delete(P, "notes", ["a"])
            assert ids(await first.nearest(P, sel, model=MODEL, query=vec(0, 1), limit=5)) == ["b", "c"]
            await first.put(record("d"), vec(-1, 1))  # first's matrix is current again: applied in place
            await first.delete(P, "notes", ["c"])
            assert ids(await first.nearest(P, sel, model=MODEL, query=vec(0, 1), limit=5)) == ["b", "d"]
            assert ids(await second.nearest(P, sel, model=MODEL, query=vec(0, 1), limit=5)) == ["b", "d"]
        finally:
            await first.close()
            await second.close()

    asyncio.run(scenario())


def test_sqlite_cache_is_bounded(tmp_path: Any) -> None:
    async def scenario() -> None:
        store = SqliteStore(tmp_path / "m.db", cache_bytes=3 * 2 * 4 * 10)  # room for 30 two-dim vectors
        await store.open()
        try:
            rng = np.random.default_rng(7)
            for ns in ("n1", "n2", "n3", "n4"):
                for i in range(20):
                    await store.put(record(f"{ns}-{i}", namespace=ns), normalized(rng.normal(size=2)))
            for ns in ("n1", "n2", "n3", "n4", "n1"):
                found = await store.nearest(P, NamespaceSelector(ns), model=MODEL, query=vec(1, 0), limit=20)
                assert len(found) == 20 and {r.namespace for r, _ in found} == {ns}
            assert len(store._indexes) <= 2
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_stored_record_this_version_cannot_load_is_skipped_on_every_read(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """What an older version stored (an episode at 1e308, which then failed every read) is left out."""
    episodes = Partition(Kind.EPISODIC, WS, "org-1", "user-1")
    good = record("good", partition=episodes, session_id="s", occurred_at=T0)
    # model_copy does not validate: the row is exactly what an older, unchecked version wrote.
    bad = good.model_copy(update={"id": "bad", "occurred_at": 1e308})
    notes = NamespaceSelector("notes")

    async def scenario(store: MemoryStore) -> None:
        await store.put(good, vec(1, 0))
        await store.put(bad, vec(1, 0.1))
        assert await store.get(episodes, "notes", "bad") is None
        assert ids(await store.list_records(episodes, notes, limit=10)) == ["good"]
        missing_k = compile_filter({"k": None})  # a filter: the store reads each record's metadata
        assert ids(await store.list_records(episodes, notes, limit=10, keep=missing_k)) == ["good"]
        found = await store.nearest(episodes, notes, model=MODEL, query=vec(1, 0), limit=5)
        assert ids(found) == ["good"]
        # A write over it keeps no out-of-range time, so the new record loads.
        fixed = good.model_copy(update={"id": "bad", "content": "fixed"})
        assert await store.put(fixed, None) is None  # the replaced one did not load either
        assert (await store.get(episodes, "notes", "bad")) == fixed

    backend.run(scenario)
    assert "bad skipped: it does not load (occurred_at)" in caplog.text
