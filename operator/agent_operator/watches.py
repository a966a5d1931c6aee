"""The operator's own watches (kopf watches only Agents and Connectors).

Metadata-only watches of ConfigMaps and Secrets: names, labels and resourceVersions, never data. An Agent
may reference a Secret or ConfigMap that does not exist yet; a label-selected watch cannot see it appear
(nobody labelled it). Watching every object's metadata can, within seconds, and costs neither the objects'
data in memory nor a write to label them. What changed is decided by the caller (`on_change`).

Object watches of the operator's children (by label): each object is handed on as it comes and not kept.
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


class _Follow:
    """LIST (in pages) then WATCH one collection, forever; re-list after a lost watch (410 Gone, a dropped
    connection). Subclasses say what an object seen means (`_seen`) and what its vanishing means (`_gone`).
    Objects are handed on and not kept: only (namespace, name) -> resourceVersion is."""

    metadata_only = False

    def __init__(self, api: KubeApi, *, path: str, kind: str, label_selector: str | None = None) -> None:
        self.api = api
        self.kind = kind
        self.path = path
        self.label_selector = label_selector
        self.known: dict[tuple[str, str], str] = {}  # (namespace, name) -> resourceVersion
        self.listed = asyncio.Event()  # set once the first listing is in

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                version = await self._relist(first=not self.listed.is_set())
                self.listed.set()
                failures = 0
                while version:
                    version = await self._watch(version)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a watch never ends: whatever failed, list again after a pause
                delay = _BACKOFF[min(failures, len(_BACKOFF) - 1)]
                failures += 1
                extra = {"kind": self.kind, "error": str(exc)[:300], "retry_in": delay}
                if isinstance(exc, ApiError | ValueError):
                    log.warning("watch failed; re-listing", extra=extra)
                else:  # a bug: its traceback
                    log.exception("watch failed unexpectedly; re-listing", extra=extra)
                await asyncio.sleep(delay)

    async def _relist(self, *, first: bool) -> str:
        seen: dict[tuple[str, str], str] = {}
        version = ""
        async for items, page_version in self.api.pages(
            self.path, label_selector=self.label_selector, metadata_only=self.metadata_only
        ):
            version = page_version
            for item in items:
                meta = item.get("metadata") or {}
                key = (meta.get("namespace", ""), meta.get("name", ""))
                seen[key] = meta.get("resourceVersion", "")
                if self.known.get(key) != seen[key]:
                    await self._seen(None if first else "MODIFIED", item)
        for namespace, name in set(self.known) - set(seen):
            await self._gone({"metadata": {"namespace": namespace, "name": name}})
        self.known = seen
        return version

    async def _watch(self, version: str) -> str:
        """Follow one watch; the resourceVersion to resume from, or "" to re-list."""
        async for event in self.api.watch(
            self.path,
            resource_version=version,
            label_selector=self.label_selector,
            metadata_only=self.metadata_only,
        ):
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
                await self._gone(obj)
            else:
                self.known[key] = meta.get("resourceVersion", "")
                await self._seen(kind, obj)
        return version

    async def _seen(self, event: str | None, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    async def _gone(self, obj: dict[str, Any]) -> None:
        raise NotImplementedError


class MetadataWatch(_Follow):
    """The metadata of one kind in one namespace (or all). The first listing reports nothing (every Agent's
    first reconcile reads what it needs); later changes and vanishings are reported as `Change`s."""

    metadata_only = True

    def __init__(
        self,
        api: KubeApi,
        *,
        kind: str,
        namespace: str | None,
        on_change: OnChange,
        label_selector: str | None = None,
    ) -> None:
        # With a selector, an object whose labels stop matching is reported as deleted (the API server's
        # watch says so), which is what it is to a reader that selects by them.
        super().__init__(
            api, path=collection_path("v1", kind, namespace), kind=kind, label_selector=label_selector
        )
        self.on_change = on_change

    async def _seen(self, event: str | None, obj: dict[str, Any]) -> None:
        if event is not None:
            await self.on_change(self._change(obj.get("metadata") or {}))

    async def _gone(self, obj: dict[str, Any]) -> None:
        await self.on_change(self._change(obj.get("metadata") or {}, deleted=True))

    def _change(self, meta: dict[str, Any], *, deleted: bool = False) -> Change:
        return Change(
            kind=self.kind,
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            resource_version="" if deleted else meta.get("resourceVersion", ""),
            labels=dict(meta.get("labels") or {}),
            deleted=deleted,
        )


# apiVersion, kind, body, deleted, initial (from the first listing)
OnObject = Callable[[str, str, dict[str, Any], bool, bool], Awaitable[None]]


class ObjectWatch(_Follow):
    """Whole objects of one kind, selected by label, in one namespace (or all): every object of the first
    listing and every change after it is handed to `on_object` and then dropped, so a restart with
    thousands of children never holds them all (kopf would keep a worker and a body per object)."""

    def __init__(
        self,
        api: KubeApi,
        *,
        api_version: str,
        kind: str,
        namespace: str | None,
        label_selector: str,
        on_object: OnObject,
    ) -> None:
        super().__init__(
            api, path=collection_path(api_version, kind, namespace), kind=kind, label_selector=label_selector
        )
        self.api_version = api_version
        self.on_object = on_object

    async def _seen(self, event: str | None, obj: dict[str, Any]) -> None:
        await self.on_object(self.api_version, self.kind, obj, False, event is None)

    async def _gone(self, obj: dict[str, Any]) -> None:
        await self.on_object(self.api_version, self.kind, obj, True, False)
