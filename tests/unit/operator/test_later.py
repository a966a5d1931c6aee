"""Deferred work per key (agent_operator.later): one call per key, at the earliest time asked for."""

from __future__ import annotations

import asyncio

from agent_operator.later import Later


def test_one_call_per_key_at_the_earliest_time_and_a_new_one_once_it_started() -> None:
    calls: list[tuple[str, str]] = []

    async def scenario() -> None:
        later: Later[str] = Later()

        def record(key: str, label: str) -> object:
            async def action() -> None:
                calls.append((key, label))
                if label == "first":  # work arriving while the call runs is scheduled anew
                    later.at(key, 0.01, record(key, "again"))

            return action

        later.at("a", 0.05, record("a", "late"))
        later.at("a", 0.01, record("a", "first"))  # earlier: replaces the late one
        later.at("a", 0.5, record("a", "dropped"))  # later than the one due: dropped
        later.at("b", 0.02, record("b", "b"))
        assert "a" in later and "b" in later
        await asyncio.sleep(0.15)
        later.at("c", 10, record("c", "never"))
        later.cancel_all()
        assert "c" not in later

    asyncio.run(scenario())
    assert calls == [("a", "first"), ("a", "again"), ("b", "b")] or calls == [
        ("a", "first"),
        ("b", "b"),
        ("a", "again"),
    ]
