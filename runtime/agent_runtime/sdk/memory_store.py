"""`MemoryServerStore`: a LangGraph `BaseStore` backed by the Agent's Memory server (semantic memory).

    store = MemoryServerStore(MemoryClient.from_env())
    graph = builder.compile(checkpointer=..., store=store)

Each LangGraph item is one semantic record: its namespace tuple joined with '.' below the root namespace
`langgraph` (LangGraph forbids '.' in labels and `langgraph` as a root label, so nothing collides), its key
as the record id (keys the server's id rule refuses are stored base64url-encoded), its value as the
record's metadata (so LangGraph filters are metadata filters) and the indexed fields' text as its content.
Needs the `langgraph` extra. TTLs are not supported; `limit` above 100 is capped at 100 by the server.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from agent_runtime.memory.wire import TOP_K_MAX, RecordView
from agent_runtime.sdk.memory import MemoryClient

ROOT_NAMESPACE = "langgraph"
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_:@-][A-Za-z0-9_.:@-]{0,127}")
_ENCODED = "b64."


def encode_key(key: str) -> str:
    """The record id for a LangGraph key: itself when the server's rule allows it, else base64url."""
    if _PLAIN_KEY.fullmatch(key) and not key.startswith(_ENCODED):
        return key
    encoded = _ENCODED + base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")
    if len(encoded) > 128:
        raise ValueError(f"key of {len(key.encode())} bytes is too long for the Memory server (at most ~90)")
    return encoded


def decode_key(record_id: str) -> str:
    if not record_id.startswith(_ENCODED):
        return record_id
    data = record_id[len(_ENCODED) :]
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).decode()


def _field_text(value: Any, path: str) -> str | None:
    if path == "$":
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


class MemoryServerStore(BaseStore):
    """LangGraph's long-term store over the Memory server; `index_fields` are what gets embedded."""

    def __init__(self, client: MemoryClient, *, index_fields: Sequence[str] = ("$",)) -> None:
        self.client = client
        self.index_fields = tuple(index_fields)

    # mapping

    @staticmethod
    def _namespace(labels: tuple[str, ...]) -> str:
        return ".".join((ROOT_NAMESPACE, *labels))

    @staticmethod
    def _labels(namespace: str) -> tuple[str, ...]:
        return tuple(namespace.split(".")[1:])

    def _item(self, record: RecordView, *, search: bool) -> Item:
        common = {
            "namespace": self._labels(record.namespace),
            "key": decode_key(record.id),
            "value": record.metadata,
            "created_at": datetime.fromtimestamp(record.created_at, tz=UTC),
            "updated_at": datetime.fromtimestamp(record.updated_at, tz=UTC),
        }
        return SearchItem(**common, score=record.score) if search else Item(**common)

    def _content(self, value: Mapping[str, Any], index: Any) -> tuple[str, bool]:
        fields = self.index_fields if index is None else (index or ())
        texts = [text for text in (_field_text(value, path) for path in fields) if text]
        if texts:
            return "\n".join(texts), True
        # Not indexed: still a record (get, filter), stored with its value as text and no vector.
        return json.dumps(value, ensure_ascii=False, sort_keys=True) or "{}", False

    def _search_args(self, op: SearchOp) -> tuple[str | None, dict[str, Any]]:
        options = {
            "namespace_prefix": self._namespace(op.namespace_prefix),
            "top_k": max(1, min(op.limit, TOP_K_MAX)),
            "offset": op.offset,
            "filter": op.filter or None,
            "org_id": "",  # LangGraph names users in its namespaces; one shared scope per Agent
            "user_id": "",
        }
        return op.query, options

    def _list_filter(self, op: ListNamespacesOp, namespaces: Iterable[str]) -> list[tuple[str, ...]]:
        found: list[tuple[str, ...]] = []
        for labels in (self._labels(ns) for ns in namespaces):
            if not all(
                _matches(labels, cond.match_type, tuple(cond.path)) for cond in op.match_conditions or ()
            ):
                continue
            if op.max_depth is not None:
                labels = labels[: op.max_depth]
            if labels not in found:
                found.append(labels)
        return found[op.offset : op.offset + op.limit]

    # sync

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                record = self.client.get_sync(
                    encode_key(op.key), namespace=self._namespace(op.namespace), org_id="", user_id=""
                )
                results.append(None if record is None else self._item(record, search=False))
            elif isinstance(op, PutOp):
                self._put_sync(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                query, options = self._search_args(op)
                results.append(
                    [self._item(r, search=True) for r in self.client.search_sync(query, **options)]
                )
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_filter(op, self._all_namespaces_sync()))
            else:
                raise TypeError(f"unknown LangGraph store operation {type(op).__name__}")
        return results

    def _put_sync(self, op: PutOp) -> None:
        namespace, record_id = self._namespace(op.namespace), encode_key(op.key)
        if op.value is None:
            self.client.delete_sync(record_id, namespace=namespace, org_id="", user_id="")
            return
        content, embed = self._content(op.value, op.index)
        self.client.write_sync(
            content,
            namespace=namespace,
            record_id=record_id,
            metadata=dict(op.value),
            embed=embed,
            org_id="",
            user_id="",
        )

    def _all_namespaces_sync(self) -> list[str]:
        names: list[str] = []
        while True:
            page = self.client.namespaces_sync(
                prefix=ROOT_NAMESPACE, limit=1000, offset=len(names), org_id="", user_id=""
            )
            names += page
            if len(page) < 1000:
                return [name for name in names if name != ROOT_NAMESPACE]

    # async

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        client = self.client
        for op in ops:
            if isinstance(op, GetOp):
                record = await client.get(
                    encode_key(op.key), namespace=self._namespace(op.namespace), org_id="", user_id=""
                )
                results.append(None if record is None else self._item(record, search=False))
            elif isinstance(op, PutOp):
                namespace, record_id = self._namespace(op.namespace), encode_key(op.key)
                if op.value is None:
                    await client.delete(record_id, namespace=namespace, org_id="", user_id="")
                else:
                    content, embed = self._content(op.value, op.index)
                    await client.write(
                        content,
                        namespace=namespace,
                        record_id=record_id,
                        metadata=dict(op.value),
                        embed=embed,
                        org_id="",
                        user_id="",
                    )
                results.append(None)
            elif isinstance(op, SearchOp):
                query, options = self._search_args(op)
                results.append([self._item(r, search=True) for r in await client.search(query, **options)])
            elif isinstance(op, ListNamespacesOp):
                names: list[str] = []
                while True:
                    page = await client.namespaces(
                        prefix=ROOT_NAMESPACE, limit=1000, offset=len(names), org_id="", user_id=""
                    )
                    names += page
                    if len(page) < 1000:
                        break
                results.append(self._list_filter(op, [n for n in names if n != ROOT_NAMESPACE]))
            else:
                raise TypeError(f"unknown LangGraph store operation {type(op).__name__}")
        return results


def _matches(labels: tuple[str, ...], match_type: str, pattern: tuple[str, ...]) -> bool:
    if len(pattern) > len(labels):
        return False
    part = labels[: len(pattern)] if match_type == "prefix" else labels[len(labels) - len(pattern) :]
    return all(want in ("*", got) for want, got in zip(pattern, part, strict=True))
