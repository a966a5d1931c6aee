"""The Memory server's logic, plain Python over a store and an embedder: the HTTP layer only maps errors.

One service serves one Agent: `workspace_id` is its APP_ID and goes into every key it reads or writes,
so nothing a request says can reach another Agent's records (M-04).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Hashable

import numpy as np

from agent_runtime.memory import duplicates, summary, taxonomy
from agent_runtime.memory.embedder import Embedder
from agent_runtime.memory.filters import FilterError, Predicate, compile_filter
from agent_runtime.memory.records import MemoryRecord, NamespaceSelector, Partition, new_record_id
from agent_runtime.memory.store.base import MemoryStore
from agent_runtime.memory.vectors import Vector, normalized
from agent_runtime.memory.wire import (
    Kind,
    ListBody,
    MoveBody,
    NamespacesBody,
    RecordView,
    ScopeBody,
    SearchBody,
    SubtreeBody,
    SummarizeBody,
    SummaryAnswer,
    WriteBody,
)

SUMMARY_MAX_EVENTS = 2000


class InvalidRequest(ValueError):
    """A 400: `field` and `problem` say what to fix."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class RecordNotFound(LookupError):
    """A 404: no such record in this Agent's scope (another Agent's record is not found either)."""


class Conflict(RuntimeError):
    """A 409: the request contradicts what is stored; `code` names the rule."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def _only_for(body: WriteBody, kind: Kind) -> None:
    episodic = {"session_id": body.session_id, "role": body.role, "occurred_at": body.occurred_at}
    for field, value in episodic.items():
        if value is not None and kind is not Kind.EPISODIC:
            raise InvalidRequest(field, f"is for episodic records; {kind.value} records have none")
    if kind is Kind.EPISODIC and body.session_id is None:
        raise InvalidRequest(
            "session_id", "is required for episodic records: the session the event belongs to"
        )
    if body.parent_id is not None and kind is not Kind.TAXONOMIC:
        raise InvalidRequest("parent_id", f"is for taxonomic records; {kind.value} records have none")


def _compile(spec: dict[str, object] | None) -> Predicate | None:
    try:
        return compile_filter(spec)
    except FilterError as exc:
        field, _, problem = str(exc).partition(": ")
        raise InvalidRequest(field, problem) from None


class MemoryService:
    """Semantic, episodic and taxonomic memory of one Agent."""

    def __init__(
        self, *, store: MemoryStore, embedder: Embedder, workspace_id: str, merge_duplicates: bool = True
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.workspace_id = workspace_id
        self.merge_duplicates = merge_duplicates  # semantic near-duplicates merged or flagged on write
        # Category writes read the tree first; within this process they take turns per namespace.
        self._locks: weakref.WeakValueDictionary[Hashable, asyncio.Lock] = weakref.WeakValueDictionary()

    def partition(self, kind: Kind, *, org_id: str, user_id: str) -> Partition:
        return Partition(kind, self.workspace_id, org_id, user_id)

    def _lock(self, key: Hashable) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    # vectors

    async def _document_vector(self, body: WriteBody) -> tuple[Vector | None, str | None]:
        if body.embedding is not None:
            model = body.embedding_model or self.embedder.model_id
            self._check_dimension(model, len(body.embedding), "embedding")
            return normalized(body.embedding), model
        if not body.embed:
            return None, None
        vector = (await self.embedder.embed([body.content], input_type="document"))[0]
        if not np.any(vector):
            return None, None  # no token the model knows: the record is found by filters only
        return vector, self.embedder.model_id

    async def _query_vector(self, body: SearchBody) -> tuple[Vector | None, str]:
        if body.embedding is not None:
            model = body.embedding_model or self.embedder.model_id
            self._check_dimension(model, len(body.embedding), "embedding")
            return normalized(body.embedding), model
        if body.embedding_model is not None:
            raise InvalidRequest("embedding_model", "is given without embedding; send the vector it names")
        assert body.query is not None
        return (await self.embedder.embed([body.query], input_type="query"))[0], self.embedder.model_id

    def _check_dimension(self, model: str, size: int, field: str) -> None:
        expected = self.embedder.dimension
        if model == self.embedder.model_id and expected is not None and size != expected:
            raise InvalidRequest(field, f"has {size} numbers; the server's model {model} makes {expected}")

    # records

    async def write(self, kind: Kind, body: WriteBody) -> tuple[MemoryRecord, bool]:
        """Store a record (replacing the one with the same id); the stored record and whether it is new."""
        _only_for(body, kind)
        partition = self.partition(kind, org_id=body.org_id, user_id=body.user_id)
        vector, model = await self._document_vector(body)
        if kind is Kind.TAXONOMIC:
            async with self._lock((partition, body.namespace)):
                return await self._write_category(partition, body, vector, model)
        if kind is Kind.SEMANTIC and vector is not None and model is not None and self.merge_duplicates:
            # The check and the write take turns per namespace, so two copies at once are one memory.
            async with self._lock((partition, body.namespace)):
                return await self._write_fact(partition, body, vector, model)
        return await self._put(partition, body, vector, model, record_id=body.id or new_record_id())

    async def _write_fact(
        self, partition: Partition, body: WriteBody, vector: Vector, model: str
    ) -> tuple[MemoryRecord, bool]:
        """A semantic write, merged into or flagged against the record it nearly repeats (`duplicates`)."""
        nearest = await self.store.nearest(
            partition, NamespaceSelector(body.namespace), model=model, query=vector, limit=2
        )
        twin = duplicates.near_duplicate(nearest, model=model, record_id=body.id)
        if twin is None:
            return await self._put(partition, body, vector, model, record_id=body.id or new_record_id())
        if body.id is not None:
            return await self._put(
                partition, body, vector, model, record_id=body.id, duplicate_of=twin.duplicate_of or twin.id
            )
        metadata = duplicates.merged_metadata(twin.metadata, body.metadata)
        merged = body.model_copy(update={"metadata": metadata})
        return await self._put(
            partition, merged, vector, model, record_id=twin.id, duplicate_of=twin.duplicate_of
        )

    async def _put(
        self,
        partition: Partition,
        body: WriteBody,
        vector: Vector | None,
        model: str | None,
        *,
        record_id: str,
        duplicate_of: str | None = None,
    ) -> tuple[MemoryRecord, bool]:
        now = time.time()
        record = MemoryRecord(
            id=record_id,
            kind=partition.kind,
            workspace_id=self.workspace_id,
            org_id=body.org_id,
            user_id=body.user_id,
            namespace=body.namespace,
            content=body.content,
            metadata=body.metadata,
            created_at=now,
            updated_at=now,
            embedding_model=model,
            session_id=body.session_id,
            role=body.role,
            occurred_at=(body.occurred_at if body.occurred_at is not None else now)
            if partition.kind is Kind.EPISODIC
            else None,
            parent_id=body.parent_id,
            duplicate_of=duplicate_of,
        )
        replaced = await self.store.put(record, vector)
        if replaced is not None:
            record = record.model_copy(update={"created_at": replaced.created_at})
        return record, replaced is None

    async def _write_category(
        self, partition: Partition, body: WriteBody, vector: Vector | None, model: str | None
    ) -> tuple[MemoryRecord, bool]:
        tree = await self._tree(partition, body.namespace)
        record_id = body.id or new_record_id()
        if body.parent_id is not None and body.parent_id not in tree.nodes:
            raise InvalidRequest("parent_id", "names no category in this namespace; create the parent first")
        existing = tree.nodes.get(record_id)
        if existing is None and len(tree.nodes) >= taxonomy.MAX_CATEGORIES:
            raise Conflict("too_many_categories", f"the namespace holds {taxonomy.MAX_CATEGORIES} categories")
        if existing is not None and tree.would_cycle(record_id, body.parent_id):
            raise Conflict("cycle", f"parent_id {body.parent_id!r} is {record_id!r} or below it")
        return await self._put(partition, body, vector, model, record_id=record_id)

    async def get(self, kind: Kind, scope: ScopeBody, record_id: str) -> RecordView:
        partition = self.partition(kind, org_id=scope.org_id, user_id=scope.user_id)
        record = await self.store.get(partition, scope.namespace, record_id)
        if record is None:
            raise RecordNotFound(record_id)
        if kind is Kind.TAXONOMIC:
            tree = await self._tree(partition, scope.namespace)
            return record.view(path=tree.path(record_id))
        return record.view()

    async def delete(self, kind: Kind, scope: ScopeBody, record_id: str, *, cascade: bool = False) -> int:
        """Delete a record (idempotent); a category with children needs `cascade` and takes them along."""
        partition = self.partition(kind, org_id=scope.org_id, user_id=scope.user_id)
        if kind is not Kind.TAXONOMIC:
            return await self.store.delete(partition, scope.namespace, [record_id])
        async with self._lock((partition, scope.namespace)):
            tree = await self._tree(partition, scope.namespace)
            below = tree.descendants(record_id) if record_id in tree.nodes else []
            if below and not cascade:
                raise Conflict(
                    "has_children",
                    f"category {record_id!r} has {len(below)} categories below it; move or delete them "
                    "first, or pass cascade=true to delete them too",
                )
            return await self.store.delete(partition, scope.namespace, [record_id, *below])

    # queries

    async def search(self, kind: Kind, body: SearchBody) -> list[RecordView]:
        """Records by meaning (scored, best first) or, with no query, by filter alone (newest first)."""
        if body.session_id is not None and kind is not Kind.EPISODIC:
            raise InvalidRequest("session_id", f"is for episodic records; {kind.value} records have none")
        keep = _compile(body.filter)
        partition = self.partition(kind, org_id=body.org_id, user_id=body.user_id)
        selector = self._selector(body.namespace, body.namespace_prefix)
        if body.query is None and body.embedding is None:
            records = await self.store.list_records(
                partition,
                selector,
                session_id=body.session_id,
                limit=body.top_k,
                offset=body.offset,
                keep=keep,
            )
            hits = [(record, None) for record in records]
        else:
            query, model = await self._query_vector(body)
            if not np.any(query):
                return []  # no word the model knows: nothing is closer than anything else
            found = await self._nearest_without_copies(
                partition, selector, body, model=model, query=query, keep=keep
            )
            hits = [
                (record, round(score, 6))
                for record, score in found[body.offset :]
                if body.min_score is None or score >= body.min_score
            ]
        if kind is not Kind.TAXONOMIC:
            return [record.view(score=score) for record, score in hits]
        trees: dict[str, taxonomy.Tree] = {}
        views = []
        for record, score in hits:
            if record.namespace not in trees:
                trees[record.namespace] = await self._tree(partition, record.namespace)
            views.append(record.view(score=score, path=trees[record.namespace].path(record.id)))
        return views

    async def _nearest_without_copies(
        self,
        partition: Partition,
        selector: NamespaceSelector,
        body: SearchBody,
        *,
        model: str,
        query: Vector,
        keep: Predicate | None,
    ) -> list[tuple[MemoryRecord, float]]:
        """The best `top_k + offset` hits, flagged copies of a hit left out: asks for more while copies
        were dropped and the store had more to give."""
        wanted = body.top_k + body.offset
        limit = wanted
        while True:
            found = await self.store.nearest(
                partition,
                selector,
                model=model,
                query=query,
                limit=limit,
                keep=keep,
                session_id=body.session_id,
            )
            kept = duplicates.without_copies(found) if partition.kind is Kind.SEMANTIC else found
            if len(kept) >= wanted or len(found) < limit:
                return kept[:wanted]
            limit *= 2

    @staticmethod
    def _selector(namespace: str | None, prefix: str | None) -> NamespaceSelector:
        if namespace is not None:
            return NamespaceSelector(namespace)
        assert prefix is not None
        return NamespaceSelector(prefix, prefix=True)

    async def list_window(self, kind: Kind, body: ListBody) -> list[RecordView]:
        """A window of records in time order (episodic: when they happened)."""
        if body.session_id is not None and kind is not Kind.EPISODIC:
            raise InvalidRequest("session_id", f"is for episodic records; {kind.value} records have none")
        records = await self.store.list_records(
            self.partition(kind, org_id=body.org_id, user_id=body.user_id),
            self._selector(body.namespace, body.namespace_prefix),
            session_id=body.session_id,
            since=body.since,
            until=body.until,
            descending=body.order == "desc",
            limit=body.limit,
            offset=body.offset,
            keep=_compile(body.filter),
        )
        return [record.view() for record in records]

    async def namespaces(self, kind: Kind, body: NamespacesBody) -> list[str]:
        partition = self.partition(kind, org_id=body.org_id, user_id=body.user_id)
        return await self.store.namespaces(
            partition, prefix=body.prefix, limit=body.limit, offset=body.offset
        )

    async def summarize(self, body: SummarizeBody) -> SummaryAnswer:
        """An extractive summary of one session's events in `since` <= t < `until` (see `memory.summary`)."""
        events = await self.store.list_records(
            self.partition(Kind.EPISODIC, org_id=body.org_id, user_id=body.user_id),
            NamespaceSelector(body.namespace),
            session_id=body.session_id,
            since=body.since,
            until=body.until,
            descending=False,
            limit=SUMMARY_MAX_EVENTS + 1,
        )
        truncated = len(events) > SUMMARY_MAX_EVENTS
        events = events[:SUMMARY_MAX_EVENTS]
        picked, text = summary.summarize(events, session_id=body.session_id, count=body.max_highlights)
        roles: dict[str, int] = {}
        for event in events:
            roles[event.role or "unknown"] = roles.get(event.role or "unknown", 0) + 1
        return SummaryAnswer(
            session_id=body.session_id,
            count=len(events),
            first_at=events[0].occurred_at if events else None,
            last_at=events[-1].occurred_at if events else None,
            roles=roles,
            highlights=[event.view() for event in picked],
            summary=text,
            truncated=truncated,
        )

    # taxonomy

    async def _tree(self, partition: Partition, namespace: str) -> taxonomy.Tree:
        nodes = await self.store.list_records(
            partition, NamespaceSelector(namespace), limit=taxonomy.MAX_CATEGORIES + 1
        )
        return taxonomy.Tree(nodes)

    async def move(self, record_id: str, body: MoveBody) -> RecordView:
        """Give a category a new parent (None: a root); refused when the parent is below the category."""
        partition = self.partition(Kind.TAXONOMIC, org_id=body.org_id, user_id=body.user_id)
        async with self._lock((partition, body.namespace)):
            tree = await self._tree(partition, body.namespace)
            node = tree.nodes.get(record_id)
            if node is None:
                raise RecordNotFound(record_id)
            if body.parent_id is not None and body.parent_id not in tree.nodes:
                raise InvalidRequest("parent_id", "names no category in this namespace")
            if tree.would_cycle(record_id, body.parent_id):
                raise Conflict("cycle", f"parent_id {body.parent_id!r} is {record_id!r} or below it")
            moved = node.model_copy(update={"parent_id": body.parent_id, "updated_at": time.time()})
            await self.store.put(moved, None, keep_vector=True)
            tree.nodes[record_id] = moved
            return moved.view(path=taxonomy.Tree(tree.nodes.values()).path(record_id))

    async def subtree(self, body: SubtreeBody) -> list[RecordView]:
        """The categories below `root_id` (or every tree), depth first, each with its depth and path."""
        partition = self.partition(Kind.TAXONOMIC, org_id=body.org_id, user_id=body.user_id)
        tree = await self._tree(partition, body.namespace)
        if body.root_id is not None and body.root_id not in tree.nodes:
            raise RecordNotFound(body.root_id)
        return [
            tree.nodes[node_id].view(depth=depth, path=tree.path(node_id))
            for node_id, depth in tree.walk(body.root_id, max_depth=body.max_depth)
        ]
