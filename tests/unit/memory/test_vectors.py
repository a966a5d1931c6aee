"""Vectors: exact top-k and the growable index the SQLite store searches."""

from __future__ import annotations

import numpy as np

from agent_runtime.memory.vectors import VectorIndex, from_bytes, normalized, to_bytes, top_k


def test_bytes_round_trip_and_normalization() -> None:
    vector = normalized([3, 4])
    assert np.allclose(vector, [0.6, 0.8]) and vector.dtype == np.float32
    assert np.array_equal(from_bytes(to_bytes(vector)), vector)


def test_top_k_is_exact_and_best_first() -> None:
    rng = np.random.default_rng(1)
    scores = rng.normal(size=1000).astype(np.float32)
    assert list(top_k(scores, 5)) == list(np.argsort(-scores)[:5])
    assert len(top_k(scores, 5000)) == 1000


def test_index_put_replace_remove_and_filtered_search() -> None:
    index = VectorIndex(2)
    for i in range(40):  # grows past its first capacity
        index.put(f"r{i}", normalized([1, i / 10]), {"even": i % 2 == 0})
    assert len(index) == 40
    assert [rid for rid, _ in index.scored(normalized([1, 0]), keep=None, limit=3)] == ["r0", "r1", "r2"]
    index.put("r0", normalized([0, 1]), {"even": True})
    index.remove("r1")
    index.remove("absent")
    assert len(index) == 39
    found = index.scored(normalized([1, 0]), keep=lambda meta: meta["even"], limit=2)
    assert [rid for rid, _ in found] == ["r2", "r4"]
    assert index.scored(normalized([0, 1]), keep=None, limit=1)[0][0] == "r0"
