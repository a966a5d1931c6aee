"""The local embedding models measured against each other and against float32 all-MiniLM-L6-v2 (issue 37).

Corpus: `data/stdlib_paraphrases.json`, 300 standard-library docstrings and 122 questions about them
worded as a programmer asks (not in the docstrings' words). Models: the packaged all-MiniLM-L6-v2 int8 ONNX
(the default), WordLlama (the light option), and the float32 all-MiniLM-L6-v2 from sentence-transformers'
own weights (`tests/benchmarks/minilm_reference.py`; `make minilm-reference` fetches them), the baseline.
Prints:
- recall@1 and recall@5 of the questions over the 300 docstrings, exact cosine, per model;
- the int8 model's agreement with float32 (cosine of the two vectors of each docstring: min and median);
- near-duplicates: the 300 docstrings each written 6 times (as is, lower case, upper case, with a trailing
  "!", doubled spaces, a "Note: " prefix) among generated distractors, 10,000 writes through MemoryService
  on a real SQLite store, with near-duplicate merging on (the server's behaviour) and off (every copy a
  record); recall@5 counts a question answered when its docstring or a copy of it is among the five best,
  and "records" is what the store holds after the writes;
- the highest cosine between two different docstrings, per model: what a merge threshold must stay above.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.benchmarks import bench_memory, minilm_reference

DATA = Path(__file__).parent / "data" / "stdlib_paraphrases.json"
TOTAL = 10_000
_VARIANTS = (
    lambda t: t,
    str.lower,
    str.upper,
    lambda t: t.rstrip(".") + "!",
    lambda t: t.replace(" ", "  "),
    lambda t: "Note: " + t,
)


def _recall(docs: np.ndarray, queries: np.ndarray, expected: list[int], k: int) -> float:
    order = np.argsort(-(queries @ docs.T), axis=1)[:, :k]
    return sum(e in row for e, row in zip(expected, order, strict=True)) / len(expected)


def _local(name: str) -> Any:
    from agent_runtime.memory.embeddings import embedder_from_env

    embedder = embedder_from_env({"MEMORY_EMBEDDINGS_LOCAL_MODEL": name})
    embedder.load()
    return embedder


def _highest_pair(docs: np.ndarray) -> float:
    similarity = docs @ docs.T
    np.fill_diagonal(similarity, -1)
    return float(similarity.max())


def duplicate_recall(
    embedder: Any, texts: list[str], questions: list[tuple[str, int]]
) -> dict[str, tuple[float, int, float]]:
    """Recall@5 and record count after writing every docstring six ways among distractors, merge on/off."""
    from agent_runtime.memory.service import MemoryService
    from agent_runtime.memory.store.sqlite import SqliteStore
    from agent_runtime.memory.wire import Kind, SearchBody, WriteBody

    rng = random.Random(37)
    writes = [(variant(text), family) for family, text in enumerate(texts) for variant in _VARIANTS]
    filler, _ = bench_memory.corpus()
    writes += [(text, -1) for text in filler[: TOTAL - len(writes)]]
    rng.shuffle(writes)
    vectors = embedder.embed_sync([text for text, _ in writes])
    query_vectors = embedder.embed_sync([q for q, _ in questions])
    model = embedder.model_id
    scope = {"namespace": "docs", "org_id": "bench", "user_id": "u-1"}
    answers: dict[str, tuple[float, int, float]] = {}

    async def run(merge: bool, tmp: Path) -> tuple[float, int, float]:
        store = SqliteStore(tmp / f"dup-{merge}.db")
        await store.open()
        service = MemoryService(store=store, embedder=embedder, workspace_id="bench", merge_duplicates=merge)
        family: dict[str, int] = {}
        started = time.perf_counter()
        for (text, fam), vector in zip(writes, vectors, strict=True):
            body = WriteBody(**scope, content=text, embedding=vector.tolist(), embedding_model=model)
            record, _ = await service.write(Kind.SEMANTIC, body)
            family.setdefault(record.id, fam)
        seconds = time.perf_counter() - started
        hits = 0
        for (_, expected), vector in zip(questions, query_vectors, strict=True):
            body = SearchBody(**scope, embedding=vector.tolist(), embedding_model=model, top_k=5)
            found = await service.search(Kind.SEMANTIC, body)
            hits += any(family.get(view.id) == expected for view in found)
        count = await store.count()
        await store.close()
        return hits / len(questions), count, len(writes) / seconds

    with tempfile.TemporaryDirectory(prefix="bench-embeddings-") as tmp:
        for merge in (True, False):
            answers["on" if merge else "off"] = asyncio.run(run(merge, Path(tmp)))
    return answers


def main() -> None:
    data = json.loads(DATA.read_text())
    ids = [doc["id"] for doc in data["docs"]]
    texts = [doc["text"] for doc in data["docs"]]
    position = {doc_id: i for i, doc_id in enumerate(ids)}
    questions = [(q["question"], position[q["doc"]]) for q in data["questions"]]
    print(f"corpus: {len(texts)} docstrings, {len(questions)} questions")
    models: dict[str, Any] = {
        "minilm (int8 ONNX, default)": _local("minilm"),
        "wordllama": _local("wordllama"),
    }
    if minilm_reference.available():
        models["all-MiniLM-L6-v2 float32 (baseline)"] = minilm_reference.ReferenceMiniLM()
    else:
        print("no float32 baseline: run `make minilm-reference` first", file=sys.stderr)
    doc_vectors: dict[str, np.ndarray] = {}
    for name, embedder in models.items():
        started = time.perf_counter()
        docs = embedder.embed_sync(texts)
        seconds = time.perf_counter() - started
        queries = embedder.embed_sync([q for q, _ in questions])
        doc_vectors[name] = docs
        expected = [e for _, e in questions]
        print(
            f"{name:38} recall@1 {_recall(docs, queries, expected, 1):.3f}   "
            f"recall@5 {_recall(docs, queries, expected, 5):.3f}   "
            f"highest cosine of two different docstrings {_highest_pair(docs):.3f}   "
            f"embeds {len(texts) / seconds:7.0f} docstrings/s (one call)"
        )
    names = list(doc_vectors)
    if len(names) == 3:
        agreement = (doc_vectors[names[0]] * doc_vectors[names[2]]).sum(axis=1)
        print(
            f"int8 against float32, cosine of each docstring's two vectors: min {agreement.min():.5f}   "
            f"median {statistics.median(agreement.tolist()):.5f}"
        )
    for name in names[:2]:
        answers = duplicate_recall(models[name], texts, questions)
        (on_recall, on_count, on_rate), (off_recall, off_count, off_rate) = answers["on"], answers["off"]
        print(
            f"{name:38} {TOTAL} writes (6 copies of each docstring): recall@5 merge on {on_recall:.3f} "
            f"({on_count} records, {on_rate:.0f} writes/s)   "
            f"merge off {off_recall:.3f} ({off_count} records, {off_rate:.0f} writes/s)"
        )


if __name__ == "__main__":
    main()
