"""What the stores keep: a record, the partition it lives in, and how ids are made.

Every record is keyed by `(kind, workspace_id, org_id, user_id, namespace, id)` (M-04). `workspace_id` is
the serving Agent's APP_ID and never comes from a request, so no body can reach another Agent's records.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from agent_runtime.memory.wire import MAX_EPOCH_S, NAMESPACE_SEPARATOR, Kind, RecordView, Timestamp

logger = logging.getLogger(__name__)

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_record_id(now: float | None = None) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, 26 characters that sort by creation time."""
    millis = int((time.time() if now is None else now) * 1000)
    value = (millis << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


@dataclass(frozen=True)
class Partition:
    """The part of the key every read fixes: one Agent, one org, one user, one kind."""

    kind: Kind
    workspace_id: str
    org_id: str = ""
    user_id: str = ""


@dataclass(frozen=True)
class NamespaceSelector:
    """One namespace exactly, or a namespace and everything below it (whole segments only)."""

    namespace: str
    prefix: bool = False

    def matches(self, namespace: str) -> bool:
        if namespace == self.namespace:
            return True
        return self.prefix and namespace.startswith(self.namespace + NAMESPACE_SEPARATOR)


class MemoryRecord(BaseModel):
    """One stored memory. The vector, when there is one, is stored beside it (see `store.base`)."""

    id: str
    kind: Kind
    workspace_id: str
    org_id: str = ""
    user_id: str = ""
    namespace: str
    content: str
    metadata: dict[str, Any]
    # Bounded as the API bounds them, so a record an older version stored out of range fails to load
    # (`decode_record` skips it) instead of failing every later call that reads it.
    created_at: Timestamp
    updated_at: Timestamp
    embedding_model: str | None = None  # the vector space of its vector; None: not searchable by meaning
    session_id: str | None = None
    role: str | None = None
    occurred_at: Timestamp | None = None
    parent_id: str | None = None
    # semantic: the record this one nearly repeats (a write with its own id; see memory.duplicates)
    duplicate_of: str | None = None

    @property
    def partition(self) -> Partition:
        return Partition(self.kind, self.workspace_id, self.org_id, self.user_id)

    def view(self, **extra: Any) -> RecordView:
        """The API's view: everything but the workspace, which the caller already is."""
        return RecordView(**self.model_dump(exclude={"workspace_id"}), **extra)


def decode_record(text: str | bytes, *, key: str) -> MemoryRecord | None:
    """A stored record, or None (with a log line naming its key and the bad fields, never the content)
    when it is not one this version can serve: a store written by an older version may hold such a row,
    and it must not make every read that meets it fail."""
    try:
        return MemoryRecord.model_validate_json(text)
    except ValidationError as exc:
        fields = sorted(
            {".".join(str(part) for part in error["loc"]) or "(record)" for error in exc.errors()}
        )
        logger.warning("memory record %s skipped: it does not load (%s)", key[:300], ", ".join(fields))
        return None


def kept_created_at(replaced: Any, record: MemoryRecord) -> float:
    """The `created_at` a replacement keeps: the replaced record's, unless that one is out of range (an
    older version's row), which would make the new record unreadable too."""
    created_at = replaced.get("created_at") if isinstance(replaced, dict) else None
    if (
        isinstance(created_at, int | float)
        and not isinstance(created_at, bool)
        and 0 <= created_at <= MAX_EPOCH_S
    ):
        return float(created_at)
    return record.created_at
