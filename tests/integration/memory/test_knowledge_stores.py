"""The knowledge service on both Memory stores (SQLite and MongoDB's wire protocol on FerretDB), with the
packaged embeddings model: the same ingest, replacement, filter and isolation behaviour on each."""

from __future__ import annotations

import pytest

from agent_runtime.memory.knowledge import KnowledgeService
from agent_runtime.memory.knowledge_wire import IngestBody, KnowledgeSearchBody
from agent_runtime.memory.local_model import LocalEmbedder
from agent_runtime.memory.records import NamespaceSelector, Partition
from agent_runtime.memory.service import RecordNotFound
from agent_runtime.memory.store.base import MemoryStore
from agent_runtime.memory.wire import Kind
from tests.integration.stores import Backend

EMBEDDER = LocalEmbedder()
GUIDE = (
    "# Guide\n\n## Returns\n\nItems can be returned within 30 days.\n\n## Hours\n\nThe shop opens at nine."
)


def test_ingest_replace_filter_and_isolation(backend: Backend[MemoryStore]) -> None:
    async def scenario(store: MemoryStore) -> None:
        mine = KnowledgeService(store=store, embedder=EMBEDDER, workspace_id="team-a.kb")
        theirs = KnowledgeService(store=store, embedder=EMBEDDER, workspace_id="team-b.kb")
        first = await mine.ingest(IngestBody(source="guide.md", text=GUIDE, metadata={"lang": "en"}))
        assert (first.status, first.chunks) == ("created", 2)
        same = await mine.ingest(IngestBody(source="guide.md", text=GUIDE, metadata={"lang": "en"}))
        assert same.status == "unchanged"
        hits = await mine.search(KnowledgeSearchBody(query="how many days to return an item", top_k=2))
        assert hits[0].headings == ["Guide", "Returns"] and hits[0].metadata == {"lang": "en"}
        old_id = hits[0].id

        changed = await mine.ingest(IngestBody(source="guide.md", text=GUIDE.replace("30", "14")))
        assert (changed.status, changed.removed) == ("replaced", 2)
        with pytest.raises(RecordNotFound):
            await mine.get(old_id)
        hits = await mine.search(KnowledgeSearchBody(query="how many days to return an item", top_k=10))
        assert len(hits) == 2 and "14 days" in hits[0].text
        assert await mine.search(KnowledgeSearchBody(query="return", filter={"lang": "en"})) == []

        # Another Agent on the same store: nothing of ours, and its own document under the same source.
        assert await theirs.search(KnowledgeSearchBody(query="how many days to return an item")) == []
        with pytest.raises(RecordNotFound):
            await theirs.get(hits[0].id)
        assert (
            await theirs.ingest(IngestBody(source="guide.md", text="# Other\n\nNothing."))
        ).status == "created"
        assert [s.chunks for s in await mine.sources(limit=10)] == [2]
        # No user's memory partition of either Agent holds a chunk.
        for workspace in ("team-a.kb", "team-b.kb"):
            user = Partition(Kind.SEMANTIC, workspace)
            assert await store.list_records(user, NamespaceSelector("chunks"), limit=10) == []

        assert await mine.delete_source("guide.md") == 2
        assert await mine.sources(limit=10) == []
        assert len(await theirs.sources(limit=10)) == 1

    backend.run(scenario)
