"""Loaded vector matrices, one per (partition, namespace, model, dimension), bounded in bytes (LRU).

A store loads a namespace's vectors into a `VectorIndex` on its first search there, keeps it current with
its own writes, and drops it when someone else may have written (each store says how it knows).
"""

from __future__ import annotations

from collections import OrderedDict

from agent_runtime.memory.records import Partition
from agent_runtime.memory.vectors import Vector, VectorIndex

IndexKey = tuple[Partition, str, str, int]  # partition, namespace, model, dimension
DEFAULT_CACHE_BYTES = 512 * 1024 * 1024


class IndexCache:
    """Matrices by key, least recently used evicted first once they hold more than `max_bytes`."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._indexes: OrderedDict[IndexKey, VectorIndex] = OrderedDict()

    def __len__(self) -> int:
        return len(self._indexes)

    def get(self, key: IndexKey) -> VectorIndex | None:
        index = self._indexes.get(key)
        if index is not None:
            self._indexes.move_to_end(key)
        return index

    def put(self, key: IndexKey, index: VectorIndex) -> None:
        self._indexes[key] = index
        self._indexes.move_to_end(key)
        total = sum(len(each) * each.dimension * 4 for each in self._indexes.values())
        while total > self.max_bytes and len(self._indexes) > 1:
            _, evicted = self._indexes.popitem(last=False)
            total -= len(evicted) * evicted.dimension * 4

    def write(
        self,
        partition: Partition,
        namespace: str,
        record_id: str,
        *,
        vector: Vector | None,
        model: str | None,
        meta: object,
    ) -> None:
        """Apply one stored write to the loaded matrices of its namespace (a replaced vector moves)."""
        self.remove(partition, namespace, [record_id])
        if vector is None or model is None:
            return
        index = self._indexes.get((partition, namespace, model, int(vector.shape[0])))
        if index is not None:
            index.put(record_id, vector, meta)

    def remove(self, partition: Partition, namespace: str, record_ids: list[str]) -> None:
        for (part, ns, _, _), index in self._indexes.items():
            if part == partition and ns == namespace:
                for record_id in record_ids:
                    index.remove(record_id)

    def drop(self, partition: Partition | None = None, namespace: str | None = None) -> None:
        """Forget the matrices of one namespace, or all of them."""
        if partition is None:
            self._indexes.clear()
            return
        for key in [k for k in self._indexes if k[0] == partition and k[1] == namespace]:
            del self._indexes[key]
