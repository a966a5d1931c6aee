from __future__ import annotations

import datetime

from agent_operator.peering import outranked

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)


def _peer(priority: int, seconds_ago: float, lifetime: int = 60) -> dict[str, object]:
    return {
        "priority": priority,
        "lifetime": lifetime,
        "lastseen": (NOW - datetime.timedelta(seconds=seconds_ago)).isoformat(),
    }


def test_highest_live_replica_is_not_outranked() -> None:
    status = {"me": _peer(50, 1), "other": _peer(10, 1)}
    assert not outranked(status, identity="me", priority=50, now=NOW)


def test_a_higher_or_equal_live_peer_outranks() -> None:
    assert outranked({"me": _peer(50, 1), "other": _peer(90, 1)}, identity="me", priority=50, now=NOW)
    assert outranked({"me": _peer(50, 1), "other": _peer(50, 1)}, identity="me", priority=50, now=NOW)


def test_dead_peers_do_not_count() -> None:
    assert not outranked({"other": _peer(90, 120)}, identity="me", priority=50, now=NOW)
