"""Vectors: their stored form (little-endian float32 bytes), normalization, and exact top-k by cosine.

`VectorIndex` holds one namespace's vectors of one model as a growable matrix, so a search is one
matrix-vector product over contiguous memory instead of a scan of stored rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]
Matrix = npt.NDArray[np.float32]


def normalized(values: Sequence[float] | npt.NDArray[Any]) -> Vector:
    """A unit-length float32 copy; the caller has refused zero vectors already."""
    vector = np.asarray(values, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def to_bytes(vector: Vector) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_bytes(blob: bytes) -> Vector:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32, copy=False)


def top_k(scores: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.intp]:
    """Positions of the `k` highest scores, best first (ties: lower position first)."""
    if k >= scores.shape[0]:
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part], kind="stable")]


class VectorIndex:
    """The vectors of one namespace in one model's space, with the metadata a filter reads."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self._matrix: Matrix = np.empty((16, dimension), dtype=np.float32)
        self._ids: list[str] = []
        self._meta: list[Any] = []
        self._row: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def put(self, record_id: str, vector: Vector, meta: Any) -> None:
        """Add or replace one vector (the caller passes it normalized and of this dimension)."""
        row = self._row.get(record_id)
        if row is None:
            row = len(self._ids)
            if row == self._matrix.shape[0]:
                grown = np.empty((row * 2, self.dimension), dtype=np.float32)
                grown[:row] = self._matrix[:row]
                self._matrix = grown
            self._ids.append(record_id)
            self._meta.append(meta)
            self._row[record_id] = row
        self._matrix[row] = vector
        self._meta[row] = meta

    def remove(self, record_id: str) -> None:
        """Drop one vector; the last row takes its place, so the matrix stays dense."""
        row = self._row.pop(record_id, None)
        if row is None:
            return
        last = len(self._ids) - 1
        if row != last:
            self._matrix[row] = self._matrix[last]
            self._ids[row] = self._ids[last]
            self._meta[row] = self._meta[last]
            self._row[self._ids[row]] = row
        self._ids.pop()
        self._meta.pop()

    def scored(
        self, query: Vector, *, keep: Callable[[Any], bool] | None, limit: int
    ) -> list[tuple[str, float]]:
        """The best `limit` (id, cosine) pairs among the rows whose metadata `keep` accepts."""
        n = len(self._ids)
        if n == 0:
            return []
        scores = self._matrix[:n] @ query
        if keep is None:
            order = top_k(scores, limit)
            return [(self._ids[i], float(scores[i])) for i in order]
        # Filtered: walk the rows best first until enough pass, so a selective filter reads few of them.
        results: list[tuple[str, float]] = []
        for i in np.argsort(-scores, kind="stable"):
            if keep(self._meta[i]):
                results.append((self._ids[i], float(scores[i])))
                if len(results) == limit:
                    break
        return results
