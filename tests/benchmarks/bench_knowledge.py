"""The knowledge base in a real Memory server (`RUNNER_MODE=memory`, SQLite, its default embeddings model).

Quality: the project's docs, runtime contracts and CRD descriptions (tests/benchmarks/knowledge_corpus.py,
about 300 documents) ingested over HTTP; the 36 questions of data/knowledge_questions.json asked through
`POST /knowledge/search` (hybrid, the default, and vector alone); recall@1 and recall@5 against BM25
over the very same chunks in this process.

Scale: 10,000 chunks (generated documents of 20 chunks each) ingested over HTTP with 4 in flight: chunks/s,
against embedding the same texts in this process with the same model (the floor an ingest cannot beat);
then search p50/p99 over HTTP at 10,000 chunks, hybrid (the default) and vector alone interleaved on the
same queries, against a plain BM25 loop over the same chunks in this process. The generated text draws on
a 42-word vocabulary, so every query word is in nearly every chunk: the word ranking's worst case.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.benchmarks.knowledge_corpus import BM25, answered, chunks_of, documents, questions
from tests.integration.memory.launched import TOKEN, MemoryServer, memory_process

SCALE_CHUNKS = 10_000
CHUNKS_PER_DOC = 20
IN_FLIGHT = 4
SEARCHES = 200

_VOCABULARY = (
    "cluster node pod agent memory tool connector policy audit trace token secret volume network service "
    "replica drain rollout config schema bundle catalog index vector search chunk model prompt answer "
    "latency budget quota limit review approval webhook channel message thread session store backup"
)
_WORDS = tuple(_VOCABULARY.split())


# 10,000 chunks through MiniLM take most of an hour on two shared cores: the scale run uses the lighter
# packaged model (the store, index and HTTP path are the same; only the embedding cost differs).
SCALE_ENV = {"MEMORY_EMBEDDINGS_LOCAL_MODEL": "wordllama"}


@contextmanager
def server(tmp: Path, extra: dict[str, str] | None = None) -> Iterator[MemoryServer]:
    with memory_process(tmp, app_id="bench.knowledge", extra=extra) as running:
        yield running


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


async def _ingest_all(base: str, bodies: list[dict[str, Any]]) -> tuple[float, int, str]:
    """Seconds to ingest `bodies` with IN_FLIGHT requests at a time; chunks made; the model id."""
    queue = list(reversed(bodies))
    made = 0
    headers = {"authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=600) as http:

        async def worker() -> None:
            nonlocal made
            while queue:
                body = queue.pop()
                answer = await http.post("/knowledge/documents", json=body)
                assert answer.status_code in (200, 201), answer.text
                made += answer.json()["chunks"]

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        elapsed = time.perf_counter() - started
        probe = await http.post(
            "/memory/semantic/records", json={"namespace": "probe", "content": "model id"}
        )
        model = probe.json()["record"]["embedding_model"]
    return elapsed, made, model


def quality(running: MemoryServer) -> dict[str, Any]:
    """Recall of the knowledge search and of BM25 over the same chunks, on the question set."""
    docs = documents()
    bodies = [
        {"source": d.source, "title": d.title, "text": d.text, "content_type": d.content_type} for d in docs
    ]
    elapsed, made, model = asyncio.run(_ingest_all(running.base_url, bodies))
    chunks = [text for doc in docs for text in chunks_of(doc)]
    assert made == len(chunks), (made, len(chunks))  # the server cut exactly the chunks BM25 ranks
    bm25 = BM25(chunks)
    asked = questions()
    found = dict.fromkeys(("hybrid@1", "hybrid@5", "vector@1", "vector@5", "bm25@1", "bm25@5"), 0)
    misses = []
    with running.client() as http:
        for question in asked:
            for mode in ("hybrid", "vector"):
                answer = http.post("/knowledge/search", json={"query": question.q, "top_k": 5, "mode": mode})
                assert answer.status_code == 200, answer.text
                texts = [hit["text"] for hit in answer.json()["results"]]
                found[f"{mode}@1"] += answered(question, texts[:1])
                found[f"{mode}@5"] += answered(question, texts)
                if mode == "hybrid" and not answered(question, texts):
                    misses.append(question.q)
            lexical = bm25.top(question.q, 5)
            found["bm25@1"] += answered(question, lexical[:1])
            found["bm25@5"] += answered(question, lexical)
    return {
        "model": model,
        "documents": len(docs),
        "chunks": len(chunks),
        "questions": len(asked),
        "ingest_s": elapsed,
        **{key: value / len(asked) for key, value in found.items()},
        "missed": misses,
    }


def _scale_bodies() -> list[dict[str, Any]]:
    rng = random.Random(37)
    bodies = []
    for doc in range(SCALE_CHUNKS // CHUNKS_PER_DOC):
        sections = []
        for section in range(CHUNKS_PER_DOC):
            words = " ".join(rng.choice(_WORDS) for _ in range(140))
            sections.append(f"## Part {section}\n\n{words.capitalize()}.")
        bodies.append({"source": f"gen/{doc}.md", "title": f"doc {doc}", "text": "\n\n".join(sections)})
    return bodies


def scale(running: MemoryServer) -> dict[str, Any]:
    bodies = _scale_bodies()
    elapsed, made, model = asyncio.run(_ingest_all(running.base_url, bodies))
    texts = [text for body in bodies for text in chunks_of_body(body)]
    # The floor: the same texts embedded in this process by the same model, in the server's batch size.
    from agent_runtime.memory.embeddings import embedder_from_env
    from agent_runtime.memory.knowledge import EMBED_BATCH

    embedder = embedder_from_env({**os.environ, **SCALE_ENV})
    load = getattr(embedder, "load", None)
    if load is not None:
        load()

    async def embed_all() -> float:
        started = time.perf_counter()
        for first in range(0, len(texts), EMBED_BATCH):
            await embedder.embed(texts[first : first + EMBED_BATCH], input_type="document")
        return time.perf_counter() - started

    floor_s = asyncio.run(embed_all())
    rng = random.Random(5)
    queries = [" ".join(rng.choice(_WORDS) for _ in range(6)) for _ in range(SEARCHES)]
    latencies: dict[str, list[float]] = {"hybrid": [], "vector": []}
    with running.client() as http:
        http.post("/knowledge/search", json={"query": "warm up", "top_k": 5})  # builds the word index
        for query in queries:
            for mode in ("hybrid", "vector"):  # interleaved, so both see the same load
                started = time.perf_counter()
                answer = http.post("/knowledge/search", json={"query": query, "top_k": 5, "mode": mode})
                latencies[mode].append(time.perf_counter() - started)
                assert answer.status_code == 200 and len(answer.json()["results"]) == 5
    bm25 = BM25(texts)
    lexical = []
    for query in queries[:50]:
        started = time.perf_counter()
        bm25.top(query, 5)
        lexical.append(time.perf_counter() - started)
    return {
        "model": model,
        "chunks": made,
        "ingest_chunks_per_s": made / elapsed,
        "embed_only_chunks_per_s": len(texts) / floor_s,
        "search_p50_ms": statistics.median(latencies["hybrid"]) * 1000,
        "search_p99_ms": _percentile(latencies["hybrid"], 99) * 1000,
        "vector_p50_ms": statistics.median(latencies["vector"]) * 1000,
        "vector_p99_ms": _percentile(latencies["vector"], 99) * 1000,
        "bm25_inprocess_p50_ms": statistics.median(lexical) * 1000,
    }


def chunks_of_body(body: dict[str, Any]) -> list[str]:
    from tests.benchmarks.knowledge_corpus import Document

    return chunks_of(Document(source=body["source"], title=body["title"], text=body["text"]))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if os.environ.get("BENCH_KNOWLEDGE_SCALE_ONLY"):
            _scale_report(Path(tmp))
            return
        with server(_mk(Path(tmp), "quality")) as running:
            figures = quality(running)
        print(
            f"quality ({figures['model']}): {figures['documents']} documents, {figures['chunks']} chunks, "
            f"{figures['questions']} questions; ingested in {figures['ingest_s']:.1f}s\n"
            f"  recall@1 hybrid {figures['hybrid@1']:.2f}  vector {figures['vector@1']:.2f}  "
            f"BM25 {figures['bm25@1']:.2f}\n"
            f"  recall@5 hybrid {figures['hybrid@5']:.2f}  vector {figures['vector@5']:.2f}  "
            f"BM25 {figures['bm25@5']:.2f}\n  missed by hybrid: {figures['missed']}",
            flush=True,
        )
        if os.environ.get("BENCH_KNOWLEDGE_QUALITY_ONLY"):
            return
        _scale_report(Path(tmp))


def _scale_report(tmp: Path) -> None:
    with server(_mk(Path(tmp), "scale"), SCALE_ENV) as running:
        figures = scale(running)
    print(
        f"scale ({figures['model']}): {figures['chunks']} chunks ingested at "
        f"{figures['ingest_chunks_per_s']:.1f} chunks/s over HTTP ({IN_FLIGHT} in flight), against "
        f"{figures['embed_only_chunks_per_s']:.1f} chunks/s embedding alone in-process "
        f"(ratio {figures['ingest_chunks_per_s'] / figures['embed_only_chunks_per_s']:.2f})\n"
        f"  search at {figures['chunks']} chunks over HTTP: hybrid p50 {figures['search_p50_ms']:.1f} ms, "
        f"p99 {figures['search_p99_ms']:.1f} ms; vector alone p50 {figures['vector_p50_ms']:.1f} ms, "
        f"p99 {figures['vector_p99_ms']:.1f} ms; the plain BM25 loop in-process p50 "
        f"{figures['bm25_inprocess_p50_ms']:.1f} ms",
        flush=True,
    )


def _mk(base: Path, name: str) -> Path:
    path = base / name
    path.mkdir()
    return path


if __name__ == "__main__":
    main()
