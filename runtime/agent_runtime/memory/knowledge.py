"""The Agent's knowledge base: documents chunked, embedded and kept in the Memory server's store.

One service serves one Agent, like `MemoryService`: every key it reads or writes is in the partition
`knowledge_partition(workspace_id)` (the Agent's APP_ID with `/knowledge` after it, which no APP_ID
and so no memory route can name), so a request reaches neither another Agent's documents nor any user's
memory. Two namespaces hold it:

- `chunks`: one record per chunk, id `k-<source key>-<content digest>-<n>`, its vector in the embedder's
  space, its metadata the document's plus `source`, `title`, `headings`, `chunk_index`, `digest`;
- `sources`: one record per document (id `s-<source key>`): its digest, model and chunk ids.

Ingesting a document whose source is known with the same digest and model is a no-op; with other content
its new chunks are written first, then its record, then the old chunks are deleted, so a search never
finds the document missing and a crash in between leaves nothing a second ingest does not clean up.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from agent_runtime.memory.chunking import Chunk, chunk_document
from agent_runtime.memory.embedder import Embedder
from agent_runtime.memory.filters import FilterError, compile_filter
from agent_runtime.memory.knowledge_wire import (
    MAX_CHUNKS_PER_DOCUMENT,
    ChunkView,
    IngestAnswer,
    IngestBody,
    KnowledgeSearchBody,
    SourceView,
)
from agent_runtime.memory.lexical import LexicalIndex, fuse
from agent_runtime.memory.records import MemoryRecord, NamespaceSelector, Partition
from agent_runtime.memory.service import InvalidRequest, RecordNotFound
from agent_runtime.memory.store.base import MemoryStore
from agent_runtime.memory.wire import Kind

WORKSPACE_SUFFIX = "/knowledge"
CHUNKS = "chunks"
SOURCES = "sources"
EMBED_BATCH = 64
RESERVED_METADATA = frozenset({"source", "title", "headings", "chunk_index", "digest"})
# The lexical index is this process's; it is built again after its own writes, and at least this often so
# that another replica's writes (a shared MongoDB) reach the word ranking too.
LEXICAL_MAX_AGE_S = 30.0
LEXICAL_MAX_CHUNKS = 200_000
HYBRID_CANDIDATES = 50


def knowledge_partition(workspace_id: str) -> Partition:
    """Where one Agent's knowledge lives: a workspace no APP_ID can be (APP_IDs hold no '/')."""
    return Partition(Kind.SEMANTIC, workspace_id + WORKSPACE_SUFFIX)


def source_key(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def content_digest(body: IngestBody) -> str:
    """What decides whether a document changed: its text and everything its chunks are cut and labelled by."""
    parts = [
        body.text,
        body.content_type,
        body.title or "",
        str(body.max_chars),
        str(body.overlap_chars),
        repr(sorted(body.metadata.items())),
    ]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def chunk_id(source: str, digest: str, index: int) -> str:
    return f"k-{source_key(source)}-{digest[:12]}-{index}"


def chunk_view(record: MemoryRecord, score: float | None = None) -> ChunkView:
    meta = record.metadata
    return ChunkView(
        id=record.id,
        source=str(meta.get("source", "")),
        title=meta.get("title"),
        headings=list(meta.get("headings") or []),
        index=int(meta.get("chunk_index", 0)),
        text=record.content,
        digest=str(meta.get("digest", "")),
        metadata={k: v for k, v in meta.items() if k not in RESERVED_METADATA},
        score=score,
    )


class KnowledgeService:
    """Ingest, search and read one Agent's documents."""

    def __init__(self, *, store: MemoryStore, embedder: Embedder, workspace_id: str) -> None:
        self.store = store
        self.embedder = embedder
        self.partition = knowledge_partition(workspace_id)
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._lexical: LexicalIndex | None = None
        self._lexical_at = 0.0
        self._lexical_lock = asyncio.Lock()
        self._writes = 0  # this process's writes so far: an index read before one is not kept as fresh

    def _wrote(self) -> None:
        self._lexical = None
        self._writes += 1

    async def _lexical_index(self) -> LexicalIndex:
        async with self._lexical_lock:
            if self._lexical is not None and time.monotonic() - self._lexical_at <= LEXICAL_MAX_AGE_S:
                return self._lexical
            writes = self._writes
            records = await self.store.list_records(
                self.partition, NamespaceSelector(CHUNKS), limit=LEXICAL_MAX_CHUNKS
            )
            index = LexicalIndex((r.id, r.content, r.metadata) for r in records)
            if writes == self._writes:  # a write while the records were read: use this one, keep none
                self._lexical, self._lexical_at = index, time.monotonic()
            return index

    def _lock(self, source: str) -> asyncio.Lock:
        lock = self._locks.get(source)
        if lock is None:
            lock = self._locks[source] = asyncio.Lock()
        return lock

    def _record(
        self, *, namespace: str, record_id: str, content: str, metadata: dict[str, Any]
    ) -> MemoryRecord:
        now = time.time()
        return MemoryRecord(
            id=record_id,
            kind=self.partition.kind,
            workspace_id=self.partition.workspace_id,
            namespace=namespace,
            content=content,
            metadata=metadata,
            created_at=now,
            updated_at=now,
        )

    async def _manifest(self, source: str) -> MemoryRecord | None:
        return await self.store.get(self.partition, SOURCES, f"s-{source_key(source)}")

    async def ingest(self, body: IngestBody) -> IngestAnswer:
        """Chunk, embed and store one document, replacing its earlier content (see the module docstring)."""
        reserved = sorted(RESERVED_METADATA & body.metadata.keys())
        if reserved:
            raise InvalidRequest(f"metadata.{reserved[0]}", "is set by the knowledge base; use another key")
        try:
            chunks = chunk_document(
                body.text,
                content_type=body.content_type,
                title=body.title,
                max_chars=body.max_chars,
                overlap_chars=body.overlap_chars,
            )
        except ValueError as exc:
            raise InvalidRequest("overlap_chars", str(exc)) from None
        if len(chunks) > MAX_CHUNKS_PER_DOCUMENT:
            raise InvalidRequest(
                "text",
                f"makes {len(chunks)} chunks; the limit is {MAX_CHUNKS_PER_DOCUMENT}: split the document",
            )
        if not chunks:
            raise InvalidRequest("text", "holds no text to index (only headings or whitespace)")
        digest = content_digest(body)
        model = self.embedder.model_id
        async with self._lock(body.source):
            manifest = await self._manifest(body.source)
            old_ids: list[str] = list(manifest.metadata.get("chunk_ids", [])) if manifest else []
            if (
                manifest is not None
                and manifest.metadata.get("digest") == digest
                and manifest.metadata.get("embedding_model") == model
            ):
                return IngestAnswer(
                    source=body.source, digest=digest, chunks=len(old_ids), status="unchanged", removed=0
                )
            new_ids = await self._write_chunks(body, chunks, digest)
            await self._write_manifest(body, digest, new_ids)
            kept = set(new_ids)
            stale = [record_id for record_id in old_ids if record_id not in kept]
            removed = await self.store.delete(self.partition, CHUNKS, stale) if stale else 0
            self._wrote()
        return IngestAnswer(
            source=body.source,
            digest=digest,
            chunks=len(new_ids),
            status="created" if manifest is None else "replaced",
            removed=removed,
        )

    async def _write_chunks(self, body: IngestBody, chunks: Sequence[Chunk], digest: str) -> list[str]:
        ids = []
        model = self.embedder.model_id
        for first in range(0, len(chunks), EMBED_BATCH):
            batch = chunks[first : first + EMBED_BATCH]
            vectors = await self.embedder.embed([c.text for c in batch], input_type="document")
            for chunk, vector in zip(batch, vectors, strict=True):
                record_id = chunk_id(body.source, digest, chunk.index)
                metadata = {
                    **body.metadata,
                    "source": body.source,
                    "title": body.title,
                    "headings": list(chunk.headings),
                    "chunk_index": chunk.index,
                    "digest": digest,
                }
                searchable = bool(np.any(vector))
                record = self._record(
                    namespace=CHUNKS, record_id=record_id, content=chunk.text, metadata=metadata
                )
                if searchable:
                    record = record.model_copy(update={"embedding_model": model})
                await self.store.put(record, vector if searchable else None)
                ids.append(record_id)
        return ids

    async def _write_manifest(self, body: IngestBody, digest: str, chunk_ids: list[str]) -> None:
        metadata = {
            "source": body.source,
            "digest": digest,
            "embedding_model": self.embedder.model_id,
            "chunk_ids": chunk_ids,
            "title": body.title,
            "document_metadata": body.metadata,
        }
        record = self._record(
            namespace=SOURCES,
            record_id=f"s-{source_key(body.source)}",
            content=body.source,
            metadata=metadata,
        )
        await self.store.put(record, None)

    async def delete_source(self, source: str) -> int:
        """Forget a document and its chunks (idempotent); how many chunks there were."""
        async with self._lock(source):
            manifest = await self._manifest(source)
            if manifest is None:
                return 0
            removed = await self.store.delete(
                self.partition, CHUNKS, list(manifest.metadata.get("chunk_ids", []))
            )
            await self.store.delete(self.partition, SOURCES, [manifest.id])
            self._wrote()
        return removed

    async def search(self, body: KnowledgeSearchBody) -> list[ChunkView]:
        """The chunks closest to the query, best first: by meaning and words fused (`hybrid`, the
        default) or by meaning alone (`vector`)."""
        try:
            keep = compile_filter(body.filter)
        except FilterError as exc:
            field, _, problem = str(exc).partition(": ")
            raise InvalidRequest(field, problem) from None
        query = (await self.embedder.embed([body.query], input_type="query"))[0]
        candidates = body.top_k if body.mode == "vector" else max(HYBRID_CANDIDATES, body.top_k)
        found = []
        if np.any(query):
            found = await self.store.nearest(
                self.partition,
                NamespaceSelector(CHUNKS),
                model=self.embedder.model_id,
                query=query,
                limit=candidates,
                keep=keep,
            )
        if body.mode == "vector":
            return [
                chunk_view(record, round(score, 6))
                for record, score in found
                if body.min_score is None or score >= body.min_score
            ]
        lexical = (await self._lexical_index()).top(body.query, limit=candidates, keep=keep)
        by_id = {record.id: record for record, _ in found}
        fused = fuse(
            [[record.id for record, _ in found], [doc_id for doc_id, _ in lexical]], limit=body.top_k
        )
        views = []
        for record_id, score in fused:
            record = by_id.get(record_id) or await self.store.get(self.partition, CHUNKS, record_id)
            if record is not None:  # a chunk replaced since the lexical index was built is skipped
                views.append(chunk_view(record, round(score, 6)))
        return views

    async def get(self, record_id: str) -> ChunkView:
        record = await self.store.get(self.partition, CHUNKS, record_id)
        if record is None:
            raise RecordNotFound(record_id)
        return chunk_view(record)

    async def sources(self, *, limit: int, offset: int = 0) -> list[SourceView]:
        records = await self.store.list_records(
            self.partition, NamespaceSelector(SOURCES), limit=limit, offset=offset
        )
        return [
            SourceView(
                source=record.content,
                digest=str(record.metadata.get("digest", "")),
                chunks=len(record.metadata.get("chunk_ids", [])),
                title=record.metadata.get("title"),
                metadata=dict(record.metadata.get("document_metadata") or {}),
                updated_at=record.updated_at,
            )
            for record in records
        ]
