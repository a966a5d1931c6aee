"""The knowledge-base HTTP bodies of the Memory server, shared by the server, the SDK and the connector.

Like the memory bodies (memory/wire.py), requests refuse unknown fields and carry their limits here.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from agent_runtime.memory.chunking import DEFAULT_MAX_CHARS, DEFAULT_OVERLAP_CHARS, MIN_MAX_CHARS
from agent_runtime.memory.wire import Metadata, TopK

MAX_DOCUMENT_CHARS = 400_000
# An ingest body is one document (at most MAX_DOCUMENT_CHARS, up to 4 bytes each as UTF-8) and its metadata.
MAX_INGEST_BODY_BYTES = 2 * 1024 * 1024
MAX_SOURCE_CHARS = 1024
MAX_CHUNKS_PER_DOCUMENT = 2000
SOURCES_LIMIT_MAX = 1000
KNOWLEDGE_TOP_K_DEFAULT = 5
_CHUNK_ID = re.compile(r"k-[0-9a-f]{16}-[0-9a-f]{12}-[0-9]{1,5}")


def check_source(value: str) -> str:
    if not value.strip() or len(value) > MAX_SOURCE_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(
            f"must be 1-{MAX_SOURCE_CHARS} printable characters naming the document, e.g. a path or URL"
        )
    return value


def check_document(value: str) -> str:
    if not value.strip():
        raise ValueError("is empty; send the document's text")
    if len(value) > MAX_DOCUMENT_CHARS:
        raise ValueError(f"is {len(value)} characters; the limit is {MAX_DOCUMENT_CHARS}: split the document")
    return value


def check_chunk_id(value: str) -> str:
    if not _CHUNK_ID.fullmatch(value):
        raise ValueError("is not a knowledge chunk id (k-<16 hex>-<12 hex>-<n>, as knowledge.search returns)")
    return value


Source = Annotated[str, AfterValidator(check_source)]
DocumentText = Annotated[str, AfterValidator(check_document)]
ChunkId = Annotated[str, AfterValidator(check_chunk_id)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IngestBody(_Body):
    """`POST /knowledge/documents`: one document; the same `source` with other content replaces its chunks."""

    source: Source
    text: DocumentText
    title: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    content_type: Literal["markdown", "text"] = "markdown"
    metadata: Metadata = Field(default_factory=dict)
    max_chars: Annotated[int, Field(ge=MIN_MAX_CHARS, le=8000)] = DEFAULT_MAX_CHARS
    overlap_chars: Annotated[int, Field(ge=0, le=4000)] = DEFAULT_OVERLAP_CHARS


class KnowledgeSearchBody(_Body):
    """`POST /knowledge/search`: chunks by meaning, best first; `filter` on metadata (memory's language)."""

    query: Annotated[str, Field(min_length=1, max_length=8192)]
    top_k: TopK = KNOWLEDGE_TOP_K_DEFAULT
    filter: dict[str, Any] | None = None
    min_score: Annotated[float, Field(ge=-1, le=1, allow_inf_nan=False)] | None = None
    # hybrid: meaning and words fused by rank (score: the fused rank score); vector: cosine alone.
    mode: Literal["hybrid", "vector"] = "hybrid"

    @model_validator(mode="after")
    def _min_score_is_a_cosine(self) -> KnowledgeSearchBody:
        if self.min_score is not None and self.mode != "vector":
            raise ValueError("min_score is a cosine: send it with mode=vector")
        return self


class ChunkView(BaseModel):
    """One chunk as the API and the tools return it."""

    id: str
    source: str
    title: str | None = None
    headings: list[str] = Field(default_factory=list)
    index: int
    text: str
    digest: str  # the document's content digest (sha256 hex) the chunk was cut from
    metadata: dict[str, Any] = Field(default_factory=dict)
    score: float | None = None


class IngestAnswer(BaseModel):
    source: str
    digest: str
    chunks: int
    status: Literal["created", "replaced", "unchanged"]
    removed: int  # chunks of the document's previous content deleted


class SearchAnswer(BaseModel):
    results: list[ChunkView]


class SourceView(BaseModel):
    source: str
    digest: str
    chunks: int
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    updated_at: float


class SourcesAnswer(BaseModel):
    sources: list[SourceView]
