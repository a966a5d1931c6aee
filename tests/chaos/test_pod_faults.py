"""The chaos tier (issue 41): pods of the OE, an AER and a Tool Pod force-deleted on the real node, its
kubelet SIGKILLed and started again, a tool allocating past its Tool Pod's memory limit, and the OE's
PostgreSQL stopped for a while, while executions start and while their approved side effects run.
`make test` runs four rounds (the first three meet each of the six kinds of fault once); `make chaos` a
longer campaign (CHAOS_ROUNDS, CHAOS_EXECUTIONS, CHAOS_SEED)."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.faults import run_chaos
from tests.cluster.controlplane import ControlPlane
from tests.cluster.real_cluster import node_platform, real_node_plane

pytestmark = pytest.mark.timeout(3600)


@pytest.fixture(scope="module")
def real_cluster() -> Iterator[tuple[ControlPlane, Path]]:
    with real_node_plane() as started:
        yield started


def test_no_side_effect_twice_and_nothing_lost_while_pods_are_killed(
    real_cluster: tuple[ControlPlane, Path],
) -> None:
    plane, archives = real_cluster
    assert plane.node is not None
    node = plane.node
    report = run_chaos(
        node_platform(plane, archives, node),
        restart_kubelet=lambda: node.restart("kubelet"),
        rounds=int(os.environ.get("CHAOS_ROUNDS", "4")),
        executions_per_round=int(os.environ.get("CHAOS_EXECUTIONS", "4")),
        seed=int(os.environ.get("CHAOS_SEED", "41")),
        store_dir=node.dir / "volumes" / f"chaos-postgres-{secrets.token_hex(4)}",
    )
    summary = report.as_dict()
    print(json.dumps(summary, indent=1))
    assert summary["duplicates"] == 0, summary
    assert summary["lost"] == 0, summary
    assert summary["server_errors"] == 0, summary  # while the store was away: 503 with Retry-After only
    assert not summary["oom"]["problems"], summary
    assert summary["faults"].get("tool over its memory limit") and summary["faults"].get("oe store stopped")
    assert summary["completed"] + summary["held"] + sum(summary["failed"].values()) == summary["executions"]
