"""The shared vectors (tests/fixtures/drain, tests/fixtures/interrupt-call) against a real AER and Tool Pod.

Every vector runs on every runtime, the Python ones and the TypeScript runner's (`ts-aer`, `ts-tool`: the
`node` launcher, with TypeScript's AbortController semantics), and must get exactly the answers its file
lists.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.drain.harness import (
    DRAIN_VECTORS,
    INTERRUPT_VECTORS,
    AERRuntime,
    DrainPlatform,
    ToolPodRuntime,
    Vector,
    load_vectors,
    play,
)

VECTORS = load_vectors(DRAIN_VECTORS) + load_vectors(INTERRUPT_VECTORS)
RUNTIMES = {"tool": ToolPodRuntime, "aer": AERRuntime, "ts-tool": ToolPodRuntime, "ts-aer": AERRuntime}
LANGUAGE = {"tool": "python", "aer": "python", "ts-tool": "node", "ts-aer": "node"}


@pytest.mark.parametrize("runtime_name", sorted(RUNTIMES))
@pytest.mark.parametrize("vector", VECTORS, ids=[vector.id for vector in VECTORS])
def test_vector(
    request: pytest.FixtureRequest,
    vector: Vector,
    runtime_name: str,
    platforms: Callable[..., DrainPlatform],
    tmp_path: Path,
) -> None:
    platform = platforms(vector.settings, LANGUAGE[runtime_name])
    request.node.drain_platform = platform
    runtime = RUNTIMES[runtime_name](platform, tmp_path)
    runtime.begin(vector, VECTORS.index(vector))
    try:
        play(vector, runtime)
    finally:
        runtime.end()


def test_every_outcome_of_both_contracts_is_covered() -> None:
    """The vectors name every outcome the contracts have (DR-04, IC-03) and the fire-on-attach race."""
    drained = {
        step["expect"].get("body", {}).get("outcome")
        for v in VECTORS
        for step in v.steps
        if "expect" in step and isinstance(step["expect"], dict)
    }
    assert {"accepted", "completed", "timed_out", "delivery_failed"} <= drained
    assert {"interrupted", "not_found", "already_settled", "not_cancellable"} <= drained
    assert any("fires on attach" in v.name for v in VECTORS)
