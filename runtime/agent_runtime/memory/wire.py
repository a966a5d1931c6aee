"""The Memory server's HTTP bodies (M-05), shared by the server and the SDK client.

Requests refuse unknown fields: a misspelt `namspace` must be a 400 naming it, never a record stored under
the wrong scope. Limits are here, so both ends state the same ones.
"""

from __future__ import annotations

import json
import math
import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

MAX_CONTENT_CHARS = 32_768
MAX_METADATA_BYTES = 64 * 1024
# Bodies are one record or one query; anything larger is a mistake or an attack.
MAX_BODY_BYTES = 1024 * 1024
TOP_K_DEFAULT = 10
TOP_K_MAX = 100
LIST_LIMIT_MAX = 1000
MAX_EMBEDDING_DIMENSION = 8192
# What the stores hold (issue 27): a timestamp a datetime can show (a summary prints it), an offset SQLite's
# OFFSET and MongoDB's skip take, vector components float32 keeps (and whose norm it can compute).
MAX_EPOCH_S = 253_402_300_799.0  # 9999-12-31T23:59:59Z
MAX_OFFSET = 2**31 - 1
MAX_EMBEDDING_COMPONENT = 1e6
MIN_EMBEDDING_MAGNITUDE = 1e-12
NAMESPACE_SEPARATOR = "."

# Namespaces are dotted paths ("prefs.food"); segments hold anything printable but the separator, so a
# LangGraph namespace tuple maps onto one (LangGraph forbids '.' in its labels too).
_SEGMENT = r"[^\x00-\x1f\x7f.]{1,128}"
_NAMESPACE = re.compile(rf"{_SEGMENT}(?:\.{_SEGMENT})*")
_RECORD_ID = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")
_SCOPE_ID = re.compile(r"[^\x00-\x1f\x7f]{0,128}")
_MODEL_ID = re.compile(r"[A-Za-z0-9_.:/@+-]{1,128}")


class Kind(StrEnum):
    """The three memory types (M-03)."""

    SEMANTIC = "semantic"
    EPISODIC = "episodic"
    TAXONOMIC = "taxonomic"


KINDS = tuple(kind.value for kind in Kind)


def check_namespace(value: str) -> str:
    if len(value) > 512 or not _NAMESPACE.fullmatch(value):
        raise ValueError(
            "must be 1-512 characters: dot-separated segments of 1-128 printable characters "
            "(no empty segment), e.g. 'preferences' or 'project.notes'"
        )
    return value


def check_record_id(value: str) -> str:
    if not _RECORD_ID.fullmatch(value):
        raise ValueError("must be 1-128 letters, digits or '_.:@-'")
    return value


def check_scope_id(value: str) -> str:
    if not _SCOPE_ID.fullmatch(value):
        raise ValueError("must be at most 128 printable characters")
    return value


def check_content(value: str) -> str:
    if not value.strip():
        raise ValueError("is empty; send the text to remember")
    if len(value) > MAX_CONTENT_CHARS:
        raise ValueError(f"is {len(value)} characters; the limit is {MAX_CONTENT_CHARS}")
    return value


def check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES}")
    return value


def check_model_id(value: str) -> str:
    if not _MODEL_ID.fullmatch(value):
        raise ValueError("must be 1-128 letters, digits or '_.:/@+-'")
    return value


def check_embedding(value: list[float]) -> list[float]:
    if not 1 <= len(value) <= MAX_EMBEDDING_DIMENSION:
        raise ValueError(f"must have 1-{MAX_EMBEDDING_DIMENSION} numbers, got {len(value)}")
    if not any(value):
        raise ValueError("is all zeros; a zero vector has no direction to compare")
    largest = max(abs(x) for x in value)
    if not all(math.isfinite(x) for x in value) or largest > MAX_EMBEDDING_COMPONENT:
        raise ValueError(f"holds a number outside ±{MAX_EMBEDDING_COMPONENT:g}; scale the vector")
    if largest < MIN_EMBEDDING_MAGNITUDE:
        raise ValueError(f"has no number of magnitude {MIN_EMBEDDING_MAGNITUDE:g} or more; scale the vector")
    return value


Namespace = Annotated[str, AfterValidator(check_namespace)]
RecordId = Annotated[str, AfterValidator(check_record_id)]
ScopeId = Annotated[str, AfterValidator(check_scope_id)]
Content = Annotated[str, AfterValidator(check_content)]
Metadata = Annotated[dict[str, Any], AfterValidator(check_metadata)]
ModelId = Annotated[str, AfterValidator(check_model_id)]
Embedding = Annotated[list[float], AfterValidator(check_embedding)]
TopK = Annotated[int, Field(ge=1, le=TOP_K_MAX)]
Timestamp = Annotated[float, Field(ge=0, le=MAX_EPOCH_S, allow_inf_nan=False)]
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET)]


class Body(BaseModel):
    """A request body: unknown fields are refused (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")


class ScopeBody(Body):
    """Who a record belongs to, below the Agent (the server's APP_ID): org, user and a caller namespace."""

    namespace: Namespace
    org_id: ScopeId = ""
    user_id: ScopeId = ""


class WriteBody(ScopeBody):
    """`POST /memory/{kind}/records`. `id` names the record (a write with an existing id replaces it);
    `embedding` brings the caller's own vector, in the space of `embedding_model` (default: the server's);
    `embed: false` stores a record that filters find but meaning does not."""

    id: RecordId | None = None
    content: Content
    metadata: Metadata = Field(default_factory=dict)
    embedding: Embedding | None = None
    embedding_model: ModelId | None = None
    embed: bool = True
    # episodic
    session_id: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    role: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    occurred_at: Timestamp | None = None
    # taxonomic
    parent_id: RecordId | None = None

    @model_validator(mode="after")
    def _embedding_consistent(self) -> WriteBody:
        if self.embedding is not None and not self.embed:
            raise ValueError("embedding is given with embed=false; drop one of them")
        if self.embedding_model is not None and self.embedding is None:
            raise ValueError("embedding_model is given without embedding; send the vector it names")
        return self


class SearchBody(Body):
    """`POST /memory/{kind}/search`: by meaning (`query` text or an `embedding`), or by filter alone.

    `namespace` is exact; `namespace_prefix` also covers every namespace below it (whole segments).
    """

    namespace: Namespace | None = None
    namespace_prefix: Namespace | None = None
    org_id: ScopeId = ""
    user_id: ScopeId = ""
    query: Content | None = None
    embedding: Embedding | None = None
    embedding_model: ModelId | None = None
    top_k: TopK = TOP_K_DEFAULT
    offset: Annotated[int, Field(ge=0, le=10_000)] = 0
    filter: dict[str, Any] | None = None
    min_score: Annotated[float, Field(ge=-1, le=1, allow_inf_nan=False)] | None = None
    session_id: Annotated[str, Field(min_length=1, max_length=256)] | None = None

    @model_validator(mode="after")
    def _one_of_each(self) -> SearchBody:
        if (self.namespace is None) == (self.namespace_prefix is None):
            raise ValueError("send exactly one of namespace or namespace_prefix")
        if self.query is not None and self.embedding is not None:
            raise ValueError("send query or embedding, not both")
        return self


class ListBody(Body):
    """`POST /memory/{kind}/list`: records in a namespace, newest first (episodic: by `occurred_at`,
    in the window `since` <= t < `until`, optionally of one session)."""

    namespace: Namespace | None = None
    namespace_prefix: Namespace | None = None
    org_id: ScopeId = ""
    user_id: ScopeId = ""
    session_id: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    since: Timestamp | None = None
    until: Timestamp | None = None
    order: Literal["asc", "desc"] = "desc"
    limit: Annotated[int, Field(ge=1, le=LIST_LIMIT_MAX)] = 50
    offset: Offset = 0
    filter: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _window(self) -> ListBody:
        if (self.namespace is None) == (self.namespace_prefix is None):
            raise ValueError("send exactly one of namespace or namespace_prefix")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("since must be before until")
        return self


class SummarizeBody(ScopeBody):
    """`POST /memory/episodic/summarize`: an extractive summary of one session's events in a window."""

    session_id: Annotated[str, Field(min_length=1, max_length=256)]
    since: Timestamp | None = None
    until: Timestamp | None = None
    max_highlights: Annotated[int, Field(ge=1, le=50)] = 5

    @model_validator(mode="after")
    def _window(self) -> SummarizeBody:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("since must be before until")
        return self


class MoveBody(ScopeBody):
    """`POST /memory/taxonomic/records/{id}/move`: a new parent, or null for a root category."""

    parent_id: RecordId | None


class SubtreeBody(ScopeBody):
    """`POST /memory/taxonomic/subtree`: the categories below `root_id` (every root when absent)."""

    root_id: RecordId | None = None
    max_depth: Annotated[int, Field(ge=0, le=64)] | None = None


class NamespacesBody(Body):
    """`POST /memory/{kind}/namespaces`: the namespaces holding records, optionally below a prefix."""

    org_id: ScopeId = ""
    user_id: ScopeId = ""
    prefix: Namespace | None = None
    limit: Annotated[int, Field(ge=1, le=LIST_LIMIT_MAX)] = 100
    offset: Offset = 0


class RecordView(BaseModel):
    """A record as the API returns it."""

    id: str
    kind: Kind
    namespace: str
    org_id: str
    user_id: str
    content: str
    metadata: dict[str, Any]
    created_at: float
    updated_at: float
    embedding_model: str | None = None
    session_id: str | None = None
    role: str | None = None
    occurred_at: float | None = None
    parent_id: str | None = None
    duplicate_of: str | None = None  # semantic: the record this one nearly repeats, left out of searches
    score: float | None = None
    path: list[str] | None = None  # taxonomic: the ids from the root down to this category
    depth: int | None = None  # taxonomic subtree: 0 for the subtree's root


class WriteAnswer(BaseModel):
    record: RecordView
    created: bool


class RecordsAnswer(BaseModel):
    """Search, list and subtree answers."""

    results: list[RecordView]


class SummaryAnswer(BaseModel):
    session_id: str
    count: int
    first_at: float | None
    last_at: float | None
    roles: dict[str, int]
    highlights: list[RecordView]
    summary: str
    truncated: bool  # the window held more events than one summary reads


class NamespacesAnswer(BaseModel):
    namespaces: list[str]
