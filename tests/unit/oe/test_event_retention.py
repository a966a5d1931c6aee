"""Event retention (issue 32): the setting, when a pass is due, and the pass itself on a real SQLite store
from the EventBus's publish path."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_runtime.oe.event_retention import (
    PRUNE_EVERY_ENV,
    RETENTION_ENV,
    EventRetention,
    EventRetentionError,
)
from agent_runtime.oe.events import EventBus
from agent_runtime.oe.store import SqliteStore
from agent_runtime.oe.stream_settings import StreamSettings

pytestmark = pytest.mark.unit


def test_the_settings_default_to_a_day_and_a_bad_value_names_the_variable() -> None:
    assert StreamSettings.from_env({}).retention == EventRetention(retention_s=86_400.0, every_s=600.0)
    kept = EventRetention.from_env({RETENTION_ENV: "0"})
    assert kept.cutoff(1_000.0) is None and not kept.due(1_000.0, last_pass=None)
    bad = ({RETENTION_ENV: "a day"}, {RETENTION_ENV: "-1"}, {PRUNE_EVERY_ENV: "0"}, {RETENTION_ENV: "nan"})
    for env in bad:
        with pytest.raises(EventRetentionError, match=next(iter(env))):
            EventRetention.from_env(env)


def test_a_pass_is_due_at_the_first_append_then_once_per_interval() -> None:
    retention = EventRetention(retention_s=3_600.0, every_s=60.0)
    assert retention.due(100.0, last_pass=None)
    assert not retention.due(159.0, last_pass=100.0)
    assert retention.due(160.0, last_pass=100.0)
    assert retention.cutoff(10_000.0) == 6_400.0


def test_publishing_prunes_old_stream_events_in_the_background(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SqliteStore(tmp_path / "oe.sqlite3")
        await store.open()
        try:
            old = 1_000.0
            for i in range(3):
                await store.append_event("e-1", type="llm_delta", step=1, data={"i": i}, at=old)
            await store.append_event("e-1", type="completed", step=None, data={}, at=old)
            bus = EventBus(store=store)
            clock = [old + 10.0]
            bus.retain(EventRetention(retention_s=5.0, every_s=60.0))
            assert bus.pruner is not None
            bus.pruner._clock = lambda: clock[0]  # the pass's "now"; the store's own times are fixed
            await bus.publish("e-2", type="llm_delta", step=1)
            await bus.pruner.idle()
            assert [e.type for e in await store.list_events("e-1")] == ["completed"]
            assert bus.pruner.pruned == 3
            # Within the interval no new pass starts, even with more due.
            await store.append_event("e-3", type="llm_delta", step=1, data={}, at=old)
            await store.append_event("e-3", type="completed", step=None, data={}, at=old)
            clock[0] += 30.0
            await bus.publish("e-2", type="llm_delta", step=1)
            await bus.pruner.idle()
            assert len(await store.list_events("e-3")) == 2
            clock[0] += 30.0
            await bus.publish("e-2", type="completed")
            await bus.pruner.idle()
            assert [e.type for e in await store.list_events("e-3")] == ["completed"]
            # e-2's own deltas are newer than the cutoff: kept for a reconnecting client.
            assert [e.type for e in await store.list_events("e-2")] == ["llm_delta", "llm_delta", "completed"]
        finally:
            await store.close()

    asyncio.run(scenario())
