"""The OE's event bus on real stores: bounded subscriber buffers, the resume mark, paging, other replicas.

Every backend (SQLite, MongoDB on FerretDB over SQLite and PostgreSQL, PostgreSQL) through the shared
`backend` fixture: a slow subscriber never slows `publish`, is told where to resume once it fell a whole
buffer behind, and a follower resuming there reads the rest from the store, nothing missed, nothing twice;
another replica's events reach a follower through the store.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from agent_runtime.oe.events import EventBus, Lagging
from agent_runtime.oe.store import Store
from agent_runtime.servers.sse_events import resume_frame, sse_frames
from tests.integration.stores import Backend

pytestmark = pytest.mark.integration

# The backends whose event methods this issue wrote; every backend's paging is in test_store.py's suite.
BACKENDS = ("sqlite", "mongodb")


@pytest.fixture(autouse=True)
def _only_these(request: pytest.FixtureRequest) -> None:
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("backend") not in BACKENDS:
        pytest.skip("the shared store suite covers this backend's events")


async def _publish(bus: EventBus, execution_id: str, n: int, *, final: bool = False) -> None:
    for i in range(n):
        await bus.publish(execution_id, type="llm_delta", step=1, data={"index": i, "text": f"t{i} "})
    if final:
        await bus.publish(execution_id, type="completed")


def test_a_stalled_subscriber_is_told_to_resume_and_resuming_misses_nothing(backend: Backend[Store]) -> None:
    async def scenario(store: Store) -> None:
        bus = EventBus(store=store, poll_s=0.05, buffer=8)
        await bus.publish("e-1", type="created")
        follower = bus.follow("e-1")
        first = await anext(follower)  # attached; now it stops reading
        assert first is not None and not isinstance(first, Lagging) and first.seq == 1
        started = time.perf_counter()
        await _publish(bus, "e-1", 40, final=True)
        publishing = time.perf_counter() - started
        # The subscriber holds at most its buffer; publishing went on regardless.
        assert bus.subscribers.count("e-1") == 1
        seen = []
        async for item in follower:
            seen.append(item)
        assert isinstance(seen[-1], Lagging)
        resume_after = seen[-1].after
        got = [item.seq for item in seen[:-1] if item is not None and not isinstance(item, Lagging)]
        assert got == list(range(2, resume_after + 1))  # everything up to the mark, in order
        assert resume_after < 42  # it did not get them all: it fell behind
        assert bus.subscribers.count("e-1") == 0  # its buffer is gone with it
        rest = [item.seq async for item in bus.follow("e-1", after_seq=resume_after) if item is not None]
        assert [1, *got, *rest] == list(range(1, 43))  # 1 + 41 deltas + completed
        assert publishing < 30  # sanity only: it returned at all while nobody read

    backend.run(scenario)


def test_a_long_backlog_is_read_a_page_at_a_time_in_order(backend: Backend[Store]) -> None:
    async def scenario(store: Store) -> None:
        bus = EventBus(store=store, poll_s=0.05, buffer=4, page=16)
        await _publish(bus, "e-2", 70, final=True)
        seqs = [item.seq async for item in bus.follow("e-2", after_seq=3) if item is not None]
        assert seqs == list(range(4, 72))

    backend.run(scenario)


def test_another_replicas_events_reach_a_follower_through_the_store(backend: Backend[Store]) -> None:
    if backend.name == "sqlite":
        pytest.skip("SQLite is one replica's store")

    async def scenario(store: Store) -> None:
        other = backend.make()
        await other.open()
        try:
            here, there = EventBus(store=store, poll_s=0.05), EventBus(store=other, poll_s=0.05)
            await here.publish("e-3", type="created")

            async def follow() -> list[int]:
                return [item.seq async for item in here.follow("e-3") if item is not None]

            task = asyncio.create_task(follow())
            await asyncio.sleep(0.1)
            await here.publish("e-3", type="llm_delta", step=1, data={"text": "a"})
            await there.publish("e-3", type="llm_delta", step=1, data={"text": "b"})  # the other replica's
            await here.publish("e-3", type="llm_delta", step=1, data={"text": "c"})
            await there.publish("e-3", type="completed")
            assert await asyncio.wait_for(task, 10) == [1, 2, 3, 4, 5]
        finally:
            await other.close()

    backend.run(scenario)


def test_the_sse_route_frames_the_resume_mark_without_an_id() -> None:
    async def events():  # type: ignore[no-untyped-def]
        yield None
        yield Lagging(after=17)

    async def collect() -> list[bytes]:
        return [frame async for frame in sse_frames("e-9", events())]

    frames = asyncio.run(collect())
    assert frames[0].startswith(b":")
    assert frames[1] == resume_frame("e-9", Lagging(after=17))
    assert b"id:" not in frames[1] and b"event: resume" in frames[1] and b'"after":17' in frames[1]
