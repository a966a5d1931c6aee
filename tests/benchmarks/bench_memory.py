"""The Memory server with 10,000 semantic records, each figure against a brute-force baseline in the same run.

A real server (`RUNNER_MODE=memory`, SQLite, a packaged local model: `BENCH_MEMORY_MODEL=minilm`, the
default, or `wordllama`, passed to it as MEMORY_EMBEDDINGS_LOCAL_MODEL) on loopback. The corpus is the
60 facts of `data/memory_paraphrases.json` hidden among 9,940 generated distractor sentences, in one
namespace of one user. Prints:
- writes/s over HTTP (8 in flight, all 10,000) and through the service in this process (no HTTP), against
  embedding the same texts one at a time and inserting them into a bare SQLite table in this process (no
  index, no record JSON, no near-duplicate check), both over the first 2,000;
- search p50/p99 over HTTP and inside the service (no HTTP), against brute force: read every vector of
  the namespace from the SQLite file and score them all with numpy, per query;
- the server's peak RSS, against a process that holds the same 10,000 texts and vectors in plain lists and
  a numpy matrix and searches them by brute force;
- recall@5 of the 60 paraphrases (is the fact among the five best?), against exact brute-force cosine over
  the same model's vectors, and a word-overlap (Jaccard) brute-force search for reference.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from tests.benchmarks.bench_toolpod import _percentile
from tests.conftest import REPO_ROOT, free_port, wait_for_port

TOKEN = "bench-memory-runtime-token"
RECORDS = 10_000
QUERIES = 300
WRITERS = 8
SCOPE = {"namespace": "facts", "org_id": "bench", "user_id": "u-1"}
PARAPHRASES = Path(__file__).parent / "data" / "memory_paraphrases.json"
MODEL = os.environ.get("BENCH_MEMORY_MODEL", "minilm")
WRITE_SAMPLE = 2_000


def _embedder() -> Any:
    """The local model the server runs, loaded, for the in-process figures and the baselines."""
    from agent_runtime.memory.embeddings import embedder_from_env

    embedder = embedder_from_env({"MEMORY_EMBEDDINGS_LOCAL_MODEL": MODEL})
    embedder.load()
    return embedder


_SUBJECTS = (
    "The committee",
    "My neighbour",
    "The new intern",
    "Our supplier",
    "The city council",
    "A local bakery",
    "The museum",
    "The football club",
    "The airline",
    "The research team",
    "My grandmother",
    "The school",
    "The startup",
    "The orchestra",
    "The hospital",
    "A delivery driver",
    "The library",
    "The mayor",
    "The hotel",
    "The garden centre",
    "The bank",
    "The train operator",
    "A software vendor",
    "The farm",
)
_VERBS = (
    "approved",
    "postponed",
    "discussed",
    "ordered",
    "cancelled",
    "announced",
    "repaired",
    "reviewed",
    "delivered",
    "rejected",
    "painted",
    "sold",
    "booked",
    "inspected",
    "renovated",
    "described",
    "priced",
    "shipped",
    "tested",
    "planned",
)
_OBJECTS = (
    "the quarterly budget",
    "a new parking policy",
    "twelve boxes of paper",
    "the spring concert",
    "the roof of the east wing",
    "a loyalty programme",
    "the invoice from March",
    "a team offsite",
    "the broken printer",
    "a charity run",
    "the annual report",
    "new office chairs",
    "the website redesign",
    "a batch of sourdough loaves",
    "the late shipment",
    "the holiday timetable",
    "a customer survey",
    "the heating system",
    "a training course",
    "the membership fees",
    "the server migration",
    "a street festival",
    "the vegetable beds",
    "the opening hours",
)
_TAILS = (
    "on Tuesday",
    "after a long meeting",
    "for the second time",
    "without any notice",
    "before the deadline",
    "at the last minute",
    "with little enthusiasm",
    "despite the rain",
    "for next year",
    "in a short email",
    "during the lunch break",
    "after several complaints",
    "ahead of schedule",
    "at a reduced price",
    "with help from volunteers",
    "for the third quarter",
)
_WORD = re.compile(r"\w+")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.3f} ms"


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def corpus() -> tuple[list[str], list[tuple[int, str]]]:
    """10,000 texts (facts among distractors) and the paraphrase queries with their fact's position."""
    pairs = json.loads(PARAPHRASES.read_text())["pairs"]
    rng = random.Random(16)
    distractors: set[str] = set()
    while len(distractors) < RECORDS - len(pairs):
        parts = (rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_OBJECTS), rng.choice(_TAILS))
        distractors.add(" ".join(parts) + ".")
    texts = sorted(distractors)
    rng.shuffle(texts)
    queries = []
    for fact, paraphrase in pairs:
        position = rng.randrange(len(texts) + 1)
        texts.insert(position, fact)
        queries.append((fact, paraphrase))
    index = {text: i for i, text in enumerate(texts)}
    return texts, [(index[fact], paraphrase) for fact, paraphrase in queries]


class Server:
    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.db = tmp / "memory.db"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp),
            "PYTHONPATH": str(REPO_ROOT),
            "RUNNER_MODE": "memory",
            "APP_HOST": "127.0.0.1",
            "RUNTIME_PORT": str(self.port),
            "RUNTIME_TOKEN": TOKEN,
            "APP_ID": "bench.memory",
            "MEMORY_SQLITE_PATH": str(self.db),
            "MEMORY_EMBEDDINGS_LOCAL_MODEL": MODEL,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent_runtime.launcher"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port("127.0.0.1", self.port, proc=self.proc, timeout=60)
        deadline = time.monotonic() + 30
        while httpx.get(f"{self.url}/readyz").status_code != 200:
            if time.monotonic() > deadline:
                raise TimeoutError("memory server not ready")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def write_all(url: str, texts: list[str]) -> float:
    """Seconds to write every text over HTTP, WRITERS at a time."""
    queue: asyncio.Queue[tuple[int, str]] = asyncio.Queue()
    for item in enumerate(texts):
        queue.put_nowait(item)

    async def writer(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            i, text = queue.get_nowait()
            body = {**SCOPE, "id": f"r{i:05}", "content": text}
            response = await client.post("/memory/semantic/records", json=body)
            response.raise_for_status()

    headers = {"authorization": f"Bearer {TOKEN}"}
    limits = httpx.Limits(max_connections=WRITERS)
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=60) as client:
        started = time.perf_counter()
        await asyncio.gather(*(writer(client) for _ in range(WRITERS)))
        return time.perf_counter() - started


def baseline_writes(texts: list[str], tmp: Path) -> float:
    """Seconds to embed the same texts and insert them into a bare SQLite table (WAL), one commit each."""
    from agent_runtime.memory.vectors import to_bytes

    embedder = _embedder()
    conn = sqlite3.connect(tmp / "bare.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, content TEXT, vector BLOB)")
    started = time.perf_counter()
    for i, text in enumerate(texts):
        vector = embedder.embed_sync([text])[0]
        conn.execute("INSERT INTO t VALUES (?, ?, ?)", (f"r{i:05}", text, to_bytes(vector)))
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def service_writes(texts: list[str], tmp: Path) -> float:
    """Seconds to write the same texts through MemoryService in this process: the server without HTTP."""
    from agent_runtime.memory.service import MemoryService
    from agent_runtime.memory.store.sqlite import SqliteStore
    from agent_runtime.memory.wire import Kind, WriteBody

    async def run() -> float:
        store = SqliteStore(tmp / "service.db")
        await store.open()
        embedder = _embedder()
        service = MemoryService(store=store, embedder=embedder, workspace_id="bench.memory")
        bodies = [WriteBody(**SCOPE, id=f"r{i:05}", content=text) for i, text in enumerate(texts)]
        started = time.perf_counter()
        for body in bodies:
            await service.write(Kind.SEMANTIC, body)
        elapsed = time.perf_counter() - started
        await store.close()
        return elapsed

    return asyncio.run(run())


def http_search_latencies(url: str, queries: list[str]) -> tuple[list[float], list[list[str]]]:
    latencies, answers = [], []
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
        for query in queries[:20]:  # warm-up: connection, first matrix load
            client.post("/memory/semantic/search", json={**SCOPE, "query": query, "top_k": 5})
        for query in queries:
            started = time.perf_counter()
            response = client.post("/memory/semantic/search", json={**SCOPE, "query": query, "top_k": 5})
            latencies.append(time.perf_counter() - started)
            answers.append([hit["id"] for hit in response.json()["results"]])
    return latencies, answers


def service_search_latencies(db: Path, queries: list[str]) -> list[float]:
    """The same searches through MemoryService in this process: the server's cost without HTTP."""
    from agent_runtime.memory.service import MemoryService
    from agent_runtime.memory.store.sqlite import SqliteStore
    from agent_runtime.memory.wire import Kind, SearchBody

    async def run() -> list[float]:
        store = SqliteStore(db)
        await store.open()
        embedder = _embedder()
        service = MemoryService(store=store, embedder=embedder, workspace_id="bench.memory")
        bodies = [SearchBody(**SCOPE, query=query, top_k=5) for query in queries]
        for body in bodies[:20]:
            await service.search(Kind.SEMANTIC, body)
        latencies = []
        for body in bodies:
            started = time.perf_counter()
            await service.search(Kind.SEMANTIC, body)
            latencies.append(time.perf_counter() - started)
        await store.close()
        return latencies

    return asyncio.run(run())


def brute_force_latencies(db: Path, queries: list[str]) -> tuple[list[float], list[list[str]]]:
    """Per query: embed, read every vector of the namespace from the file, score all, take the best 5."""
    embedder = _embedder()
    conn = sqlite3.connect(db)
    sql = (
        "SELECT id, vector FROM records WHERE kind = 'semantic' AND workspace_id = 'bench.memory' "
        "AND org_id = ? AND user_id = ? AND namespace = ?"
    )
    params = (SCOPE["org_id"], SCOPE["user_id"], SCOPE["namespace"])
    latencies, answers = [], []
    for query in queries:
        started = time.perf_counter()
        vector = embedder.embed_sync([query])[0]
        rows = conn.execute(sql, params).fetchall()
        matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype="<f4").reshape(len(rows), -1)
        best = np.argsort(-(matrix @ vector))[:5]
        answers.append([rows[i][0] for i in best])
        latencies.append(time.perf_counter() - started)
    conn.close()
    return latencies, answers


_BASELINE_RSS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from agent_runtime.memory.embeddings import embedder_from_env
    texts, queries, model = json.load(sys.stdin)
    embedder = embedder_from_env({"MEMORY_EMBEDDINGS_LOCAL_MODEL": model})
    embedder.load()
    vectors = [embedder.embed_sync(texts[i : i + 256]) for i in range(0, len(texts), 256)]
    rows = [row for block in vectors for row in block]
    kept = [(f"r{i:05}", text, row.tolist()) for i, (text, row) in enumerate(zip(texts, rows))]
    matrix = np.asarray([vector for _, _, vector in kept], dtype=np.float32)
    for query in queries:
        best = np.argsort(-(matrix @ embedder.embed_sync([query])[0]))[:5]
    print(open("/proc/self/status").read().split("VmHWM:")[1].split()[0])
    """
)


def baseline_rss_mb(texts: list[str], queries: list[str]) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _BASELINE_RSS],
        input=json.dumps([texts, queries, MODEL]),
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "runtime")},
    )
    return int(done.stdout.strip()) / 1024


def word_overlap_top5(texts: list[str], query: str) -> list[int]:
    words = [set(_WORD.findall(text.lower())) for text in texts]
    wanted = set(_WORD.findall(query.lower()))
    scores = [len(wanted & w) / (len(wanted | w) or 1) for w in words]
    return sorted(range(len(texts)), key=lambda i: -scores[i])[:5]


def main() -> None:
    texts, paraphrases = corpus()
    rng = random.Random(7)
    random_queries = [rng.choice(texts) for _ in range(QUERIES - len(paraphrases))]
    queries = [q for _, q in paraphrases] + random_queries
    hidden = len(texts) - len(paraphrases)
    print(f"model: {MODEL} (BENCH_MEMORY_MODEL)")
    print(f"corpus: {len(texts)} semantic records ({len(paraphrases)} facts among {hidden} distractors)")
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp_name:
        tmp = Path(tmp_name)
        server = Server(tmp)
        try:
            seconds = asyncio.run(write_all(server.url, texts))
            # One at a time, a transformer takes minutes for 10,000: the in-process rates are over a sample.
            sample = texts[:WRITE_SAMPLE]
            service_seconds = service_writes(sample, tmp)
            base_seconds = baseline_writes(sample, tmp)
            n, m = len(texts), len(sample)
            print(
                f"writes/s       server over HTTP ({WRITERS} in flight, {n}): {n / seconds:7.0f}   "
                f"in-process service, one at a time (first {m}): {m / service_seconds:7.0f}   "
                f"baseline embed one at a time + bare SQLite insert (first {m}): {m / base_seconds:7.0f}"
            )

            http_lat, http_answers = http_search_latencies(server.url, queries)
            service_lat = service_search_latencies(server.db, queries)
            brute_lat, brute_answers = brute_force_latencies(server.db, queries)
            for name, samples in (
                ("search HTTP (server)", http_lat),
                ("search in-process service", service_lat),
                ("brute force (read + score all)", brute_lat),
            ):
                print(
                    f"{name:32} p50 {_ms(_percentile(samples, 0.5))}   p99 {_ms(_percentile(samples, 0.99))}"
                    f"   ({len(samples)} queries, top_k 5)"
                )
            brute_p50 = _percentile(brute_lat, 0.5)
            print(
                f"search p50 speed-up over brute force: HTTP {brute_p50 / _percentile(http_lat, 0.5):.1f}x, "
                f"in-process {brute_p50 / _percentile(service_lat, 0.5):.1f}x"
            )

            server_rss = _peak_rss_mb(server.proc.pid)
            base_rss = baseline_rss_mb(texts, queries[:50])
            print(
                f"peak RSS       server with {len(texts)} records, after the searches: {server_rss:7.1f} MiB"
                f"   baseline (same texts and vectors in lists + a matrix, brute force): {base_rss:7.1f} MiB"
            )

            expected = [f"r{position:05}" for position, _ in paraphrases]
            server_hits = sum(exp in got for exp, got in zip(expected, http_answers, strict=False))
            brute_hits = sum(exp in got for exp, got in zip(expected, brute_answers, strict=False))
            same_top5 = sum(set(a) == set(b) for a, b in zip(http_answers, brute_answers, strict=True))
            lexical_hits = sum(position in word_overlap_top5(texts, query) for position, query in paraphrases)
            n = len(paraphrases)
            print(
                f"recall@5       {n} paraphrases: server {server_hits / n:.3f}   "
                f"brute-force cosine, same vectors {brute_hits / n:.3f}   "
                f"word-overlap brute force {lexical_hits / n:.3f}"
            )
            print(f"               top-5 sets identical to brute force on {same_top5}/{len(queries)} queries")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
