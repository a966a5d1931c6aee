"""Metadata-only watches of ConfigMaps and Secrets: names, labels and resourceVersions, never data.

An Agent may reference a Secret or ConfigMap that does not exist yet; a label-selected watch cannot see it
appear (nobody labelled it). Watching every object's metadata can, within seconds, and costs neither the
objects' data in memory nor a write to label them. What changed is decided by the caller (`on_change`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent_operator.kube import ApiError, KubeApi, collection_path

log = logging.getLogger("agent_operator")

_BACKOFF = (1.0, 2.0, 5.0, 10.0, 30.0)


@dataclass(frozen=True)
class Change:
    """One object's metadata after a change: `deleted`, or its current resourceVersion and labels."""

    kind: str
    namespace: str
    name: str
    resource_version: str
    labels: dict[str, str]
    deleted: bool = False


OnChange = Callable[[Change], Awaitable[None]]


class MetadataWatch:
    """LIST then WATCH one kind's metadata in one namespace (or all), forever.

    The first listing reports nothing (every Agent's first reconcile reads what it needs); a re-list after
    a lost watch (410 Gone, a dropped connection) reports what changed or vanished meanwhile.
    """

    def __init__(self, api: KubeApi, *, kind: str, namespace: str | None, on_change: OnChange) -> None:
        self.api = api
        self.kind = kind
        self.path = collection_path("v1", kind, namespace)
        self.on_change = on_change
        self.known: dict[tuple[str, str], str] = {}  # (namespace, name) -> resourceVersion
        self.listed = asyncio.Event()  # set once the first listing is in

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                version = await self._relist(report=self.listed.is_set())
                self.listed.set()
                failures = 0
                while version:
                    version = await self._watch(version)
            except asyncio.CancelledError:
                raise
            except (ApiError, ValueError) as exc:  # ApiError: an answer, or none (ApiUnreachable)
                delay = _BACKOFF[min(failures, len(_BACKOFF) - 1)]
                failures += 1
                log.warning(
                    "metadata watch failed; re-listing",
                    extra={"kind": self.kind, "error": str(exc)[:300], "retry_in": delay},
                )
                await asyncio.sleep(delay)

    async def _relist(self, *, report: bool) -> str:
        items, version = await self.api.list_metadata(self.path)
        seen: dict[tuple[str, str], str] = {}
        for item in items:
            meta = item.get("metadata") or {}
            key = (meta.get("namespace", ""), meta.get("name", ""))
            seen[key] = meta.get("resourceVersion", "")
            if report and self.known.get(key) != seen[key]:
                await self.on_change(self._change(meta))
        if report:
            for namespace, name in set(self.known) - set(seen):
                await self.on_change(Change(self.kind, namespace, name, "", {}, deleted=True))
        self.known = seen
        return version

    async def _watch(self, version: str) -> str:
        """Follow one watch; the resourceVersion to resume from, or "" to re-list."""
        async for event in self.api.watch_metadata(self.path, resource_version=version):
            kind = event.get("type")
            obj = event.get("object") or {}
            meta = obj.get("metadata") or {}
            if kind == "ERROR":
                return ""  # 410 Gone and the like: the history is lost, list again
            version = meta.get("resourceVersion", version)
            if kind == "BOOKMARK":
                continue
            key = (meta.get("namespace", ""), meta.get("name", ""))
            if kind == "DELETED":
                self.known.pop(key, None)
                await self.on_change(self._change(meta, deleted=True))
            else:
                self.known[key] = meta.get("resourceVersion", "")
                await self.on_change(self._change(meta))
        return version

    def _change(self, meta: dict[str, Any], *, deleted: bool = False) -> Change:
        return Change(
            kind=self.kind,
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            resource_version="" if deleted else meta.get("resourceVersion", ""),
            labels=dict(meta.get("labels") or {}),
            deleted=deleted,
        )
