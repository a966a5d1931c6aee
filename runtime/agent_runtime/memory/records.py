"""What the stores keep: a record, the partition it lives in, and how ids are made.

Every record is keyed by `(kind, workspace_id, org_id, user_id, namespace, id)` (M-04). `workspace_id` is
the serving Agent's APP_ID and never comes from a request, so no body can reach another Agent's records.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from agent_runtime.memory.wire import NAMESPACE_SEPARATOR, Kind, RecordView

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
    created_at: float
    updated_at: float
    embedding_model: str | None = None  # the vector space of its vector; None: not searchable by meaning
    session_id: str | None = None
    role: str | None = None
    occurred_at: float | None = None
    parent_id: str | None = None

    @property
    def partition(self) -> Partition:
        return Partition(self.kind, self.workspace_id, self.org_id, self.user_id)

    def view(self, **extra: Any) -> RecordView:
        """The API's view: everything but the workspace, which the caller already is."""
        return RecordView(**self.model_dump(exclude={"workspace_id"}), **extra)
