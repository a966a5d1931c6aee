"""`knowledge`: the Agent's internal knowledge base, kept in its Memory server (docs/knowledge.md).

Documents come from files mounted into the Tool Pod (`paths`: a ConfigMap or Secret volume, a directory
walked for .md/.markdown/.txt files), from `urls` the Tool Pod fetches, or from `agentengine knowledge
add` (which posts to the Memory server directly). The connector syncs its files and URLs on its first call
and again every `refresh_s`: each is ingested (the Memory server skips one whose content digest is
unchanged and replaces the chunks of one that changed), and a file or URL no longer configured is
forgotten. A URL that fails to load keeps its earlier chunks.

`knowledge.search` and `knowledge.get` are reads (not sensitive). The Tool Pod reaches the Memory server
with AGENTIC_MEMORY_URL and the runtime token, as the SDK's memory client does; this connector needs no
secret of its own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from agent_runtime.connectors.builtin._rest import host_port
from agent_runtime.connectors.framework import (
    INVALID_ARGUMENTS,
    BuiltinConnector,
    BuiltinToolError,
    TestResult,
    tool,
)
from agent_runtime.memory.knowledge_client import (
    KnowledgeClient,
    KnowledgeRequestError,
    KnowledgeUnavailable,
)
from agent_runtime.memory.knowledge_wire import MAX_DOCUMENT_CHARS, IngestBody, KnowledgeSearchBody

logger = logging.getLogger(__name__)

SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".txt": "text"}
MAX_FILES = 5000
MAX_URL_BYTES = 2 * 1024 * 1024
CHUNK_ID_PATTERN = r"^k-[0-9a-f]{16}-[0-9a-f]{12}-[0-9]{1,5}$"  # what knowledge.search returns, nothing else
_TAG = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.DOTALL | re.IGNORECASE)


def _problem(exc: KnowledgeRequestError) -> str:
    detail = exc.detail
    if isinstance(detail, list):
        return "; ".join(f"{p.get('field')}: {p.get('problem')}" for p in detail if isinstance(p, dict))
    return str(detail)


def html_text(html: str) -> str:
    """The text of an HTML page (scripts, styles and tags dropped), good enough to chunk and embed."""
    import html as html_module

    text = html_module.unescape(_TAG.sub(" ", html))
    return "\n\n".join(line.strip() for line in re.split(r"\n\s*\n", text) if line.strip())


def file_documents(roots: list[str]) -> dict[str, tuple[str, str, str]]:
    """{source: (title, content type, text)} of the knowledge files under `roots` (a mounted ConfigMap's
    `..data` links and hidden files skipped; unreadable or non-UTF-8 files logged and skipped)."""
    found: dict[str, tuple[str, str, str]] = {}
    for root in roots:
        base = Path(root)
        candidates = [base] if base.is_file() else sorted(base.rglob("*")) if base.is_dir() else []
        for path in candidates:
            relative = path.relative_to(base) if path != base else Path(path.name)
            if any(part.startswith(".") for part in relative.parts) or not path.is_file():
                continue
            content_type = SUFFIXES.get(path.suffix.lower())
            if content_type is None:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                logger.warning("knowledge file %s skipped: %s", path, type(exc).__name__)
                continue
            if text.strip() and len(text) <= MAX_DOCUMENT_CHARS:
                found[f"file:{base.name}/{relative.as_posix()}"] = (relative.name, content_type, text)
            elif text.strip():
                logger.warning("knowledge file %s skipped: over %d characters", path, MAX_DOCUMENT_CHARS)
            if len(found) >= MAX_FILES:
                return found
    return found


class KnowledgeConnector(BuiltinConnector):
    type = "knowledge"
    description = (
        "Search the Agent's own documents (mounted files, fetched URLs, texts added with "
        "`agentengine knowledge add`), chunked and embedded in its Memory server."
    )
    config_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "paths": {
                "type": "array",
                "maxItems": 32,
                "items": {"type": "string", "pattern": r"^/", "maxLength": 1024},
                "description": "files or directories in the Tool Pod (e.g. a mounted ConfigMap) to index",
            },
            "urls": {
                "type": "array",
                "maxItems": 200,
                "items": {"type": "string", "pattern": r"^https?://[^\s/?#]+", "maxLength": 2048},
                "description": "pages the Tool Pod fetches and indexes (markdown, text or HTML)",
            },
            "refresh_s": {"type": "integer", "minimum": 0, "maximum": 86400, "default": 300},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
            "sync_wait_s": {"type": "number", "minimum": 0, "maximum": 120, "default": 20},
            "timeout_s": {"type": "number", "minimum": 1, "maximum": 120, "default": 30},
        },
    }
    tools = (
        tool(
            "knowledge.search",
            "Search the Agent's knowledge base by meaning. Returns the best chunks, each with its id, "
            'source, headings, score and text; filter on document metadata (e.g. {"team": "support"}).',
            properties={
                "query": {"type": "string", "minLength": 1, "maxLength": 2000},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 20},
                "filter": {"type": "object", "description": "metadata filter: {field: value} or $in/$gt/..."},
            },
            required=["query"],
            sensitive=False,
        ),
        tool(
            "knowledge.get",
            "Read one knowledge chunk in full by the id knowledge.search returned.",
            properties={"id": {"type": "string", "pattern": CHUNK_ID_PATTERN, "maxLength": 64}},
            required=["id"],
            sensitive=False,
        ),
    )

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._client: KnowledgeClient | None = None
        self._sync_lock = asyncio.Lock()
        self._synced_at: float | None = None
        self._sync_task: asyncio.Task[None] | None = None

    def _knowledge(self) -> KnowledgeClient:
        if self._client is None:
            try:
                self._client = KnowledgeClient.from_env(self._env or os.environ)
            except KnowledgeUnavailable as exc:
                raise BuiltinToolError("connection", str(exc)) from None
        return self._client

    # sync

    def _due(self) -> bool:
        if not (self.config.get("paths") or self.config.get("urls")):
            return False
        if self._synced_at is None:
            return True
        refresh = int(self.config["refresh_s"])
        return refresh > 0 and time.monotonic() - self._synced_at >= refresh

    async def _fetch(self, http: httpx.AsyncClient, url: str) -> tuple[str, str, str] | None:
        try:
            # Streamed and cut at the bound: a large or endless body must not be held whole first.
            async with http.stream("GET", url, follow_redirects=False) as response:
                body = bytearray()
                if response.status_code == 200:
                    async for piece in response.aiter_bytes():
                        body += piece
                        if len(body) > MAX_URL_BYTES:
                            break
        except httpx.HTTPError as exc:
            logger.warning("knowledge URL %s not fetched: %s", host_port(url)[0], type(exc).__name__)
            return None
        if response.status_code != 200 or len(body) > MAX_URL_BYTES:
            logger.warning(
                "knowledge URL %s not indexed: status %d, %s bytes",
                host_port(url)[0],
                response.status_code,
                f"over {MAX_URL_BYTES}" if len(body) > MAX_URL_BYTES else len(body),
            )
            return None
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        text = bytes(body).decode(response.encoding or "utf-8", errors="replace")  # the response's charset
        if media == "text/html":
            text, content_type = html_text(text), "text"
        else:
            content_type = (
                "markdown" if media in ("text/markdown", "text/x-markdown") or url.endswith(".md") else "text"
            )
        if not text.strip() or len(text) > MAX_DOCUMENT_CHARS:
            return None
        return url.rsplit("/", 1)[-1] or url, content_type, text

    async def sync(self) -> dict[str, int]:
        """Ingest the configured files and URLs; forget this connector's documents no longer configured."""
        async with self._sync_lock:
            if not self._due():
                return {}
            client = self._knowledge()
            documents = {
                source: (*doc, "file")
                for source, doc in file_documents(list(self.config.get("paths") or [])).items()
            }
            failed_urls: set[str] = set()
            async with httpx.AsyncClient(timeout=float(self.config["timeout_s"])) as http:
                for url in self.config.get("urls") or []:
                    fetched = await self._fetch(http, url)
                    if fetched is None:
                        failed_urls.add(url)
                    else:
                        documents[url] = (*fetched, "url")
            counts = {"created": 0, "replaced": 0, "unchanged": 0, "failed": len(failed_urls), "forgotten": 0}
            for source, (title, content_type, text, origin) in documents.items():
                try:
                    answer = await client.ingest(
                        IngestBody(
                            source=source,
                            text=text,
                            title=title,
                            content_type=content_type,  # type: ignore[arg-type]
                            metadata={"origin": origin, "connector": self.name},
                        )
                    )
                except KnowledgeRequestError as exc:
                    logger.warning("knowledge %s not indexed: %s", source[:200], _problem(exc))
                    counts["failed"] += 1
                    continue
                counts[answer.status] += 1
            keep = set(documents) | failed_urls
            for known in await client.all_sources():
                mine = known.metadata.get("connector") == self.name and known.metadata.get("origin") in (
                    "file",
                    "url",
                )
                if mine and known.source not in keep:
                    await client.forget(known.source)
                    counts["forgotten"] += 1
            self._synced_at = time.monotonic()
            logger.info("knowledge %s synced: %s", self.name, counts)
            return counts

    async def _ensure_synced(self) -> bool:
        """Sync when due; True while a first sync is still running after `sync_wait_s`."""
        if self._sync_task is None or self._sync_task.done():
            failed = self._sync_task is not None and not self._sync_task.cancelled()
            if failed and self._sync_task is not None and self._sync_task.exception() is not None:
                logger.warning(
                    "knowledge %s sync failed: %s", self.name, type(self._sync_task.exception()).__name__
                )
            if not self._due():
                return False
            self._sync_task = asyncio.create_task(self.sync())
        if self._synced_at is not None:
            return False  # a refresh runs behind the calls: only the first sync is waited for
        try:
            await asyncio.wait_for(asyncio.shield(self._sync_task), timeout=float(self.config["sync_wait_s"]))
        except TimeoutError:
            return True
        except (KnowledgeUnavailable, KnowledgeRequestError, BuiltinToolError):
            return False  # the search below reports the Memory server's state
        return False

    # tools

    async def _call(self, tool: str, arguments: dict[str, Any], env: Mapping[str, str]) -> Any:
        indexing = await self._ensure_synced()
        client = self._knowledge()
        try:
            if tool == "knowledge.search":
                body = KnowledgeSearchBody(
                    query=arguments["query"],
                    top_k=int(arguments.get("top_k") or self.config["top_k"]),
                    filter=arguments.get("filter"),
                )
                hits = await client.search(body)
                return {
                    "results": [hit.model_dump(mode="json", exclude={"digest"}) for hit in hits],
                    **({"indexing": True} if indexing else {}),
                }
            chunk = await client.get(str(arguments["id"]))
        except KnowledgeUnavailable as exc:
            raise BuiltinToolError("connection", str(exc)) from None
        except KnowledgeRequestError as exc:
            category = INVALID_ARGUMENTS if exc.status == 400 else "client_error"
            raise BuiltinToolError(category, _problem(exc), status_code=exc.status) from None
        if chunk is None:
            raise BuiltinToolError(
                "not_found", f"no knowledge chunk {arguments['id']!r}; search again for ids"
            )
        return chunk.model_dump(mode="json", exclude={"digest", "score"})

    async def test_connection(self, *, env: Mapping[str, str] | None = None) -> TestResult:
        try:
            sources = await self._knowledge().sources(limit=1000)
        except (BuiltinToolError, KnowledgeUnavailable, KnowledgeRequestError) as exc:
            return TestResult(ok=False, detail=str(exc))
        return TestResult(ok=True, detail=f"the knowledge base holds {len(sources)} documents")

    async def aclose(self) -> None:
        if self._sync_task is not None and not self._sync_task.done():
            self._sync_task.cancel()
        if self._client is not None:
            await self._client.aclose()

    @classmethod
    def egress(cls, config: Mapping[str, Any]) -> list[tuple[str, int]]:
        return sorted({host_port(url) for url in config.get("urls") or []})
