"""Near-duplicate memories: which stored record a new semantic memory nearly repeats, and how search
results leave the copies out, so that one fact written five times cannot fill the top five.

A write that names no id and nearly repeats a record of its namespace (cosine at or above the model's
threshold) is merged into it: that record takes the new content and vector, the union of the metadata
(the new values win) and keeps its id and `created_at`. A write that names its own id is stored as asked
(the caller owns its ids) with `duplicate_of` naming the record it repeats; a search then leaves it out
wherever the record it repeats is among the results, and shows it where that one is not (deleted,
filtered out).
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_runtime.memory.records import MemoryRecord

# Cosine at or above which two texts are one memory, per model. It must sit above distinct texts that
# share most of their words: for MiniLM the closest two of 300 standard-library docstrings (os.execlp and
# os.execlpe, one clause apart) score 0.966, "at 3pm" / "at 4pm" on the same meeting 0.950 and a negation
# 0.945, while case, punctuation and spacing alone score 0.973 to 0.998: a narrow margin, so only copies
# in all but form are merged, not rewordings. The static WordLlama model
# cannot see a negation at all (0.981), so only near-verbatim copies count there.
# tests/benchmarks/bench_embeddings.py prints the closest pair per model.
THRESHOLDS = {
    "all-MiniLM-L6-v2/onnx-int8": 0.97,
    "wordllama/l2_supercat-256": 0.99,
}
DEFAULT_THRESHOLD = 0.97


def threshold(model: str) -> float:
    return THRESHOLDS.get(model, DEFAULT_THRESHOLD)


def near_duplicate(
    nearest: Sequence[tuple[MemoryRecord, float]], *, model: str, record_id: str | None
) -> MemoryRecord | None:
    """The closest record at or above the model's threshold, other than the one being replaced."""
    limit = threshold(model)
    for record, score in nearest:
        if record.id != record_id and score >= limit:
            return record
    return None


def merged_metadata(old: dict[str, object], new: dict[str, object]) -> dict[str, object]:
    return {**old, **new}


def without_copies(hits: Sequence[tuple[MemoryRecord, float]]) -> list[tuple[MemoryRecord, float]]:
    """The hits less every flagged copy whose original is among them too (order kept)."""
    present = {record.id for record, _ in hits}
    return [(record, score) for record, score in hits if record.duplicate_of not in present]
