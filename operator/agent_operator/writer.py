"""Applying an Agent's children: write only what differs, in an order that never leaves a pod unprotected,
and put back what someone changed by hand.

What the namespace holds is learnt with one LIST per kind per namespace, then kept current by our own writes
and the watches; a resync forgets it and lists again. Every applied object carries the hash of its rendered
content (`agentengine.io/applied-hash`), so an unchanged rendering costs no write. A hand edit leaves that
hash alone, so the live object itself is checked against the rendering (drift.py) whenever a watch, a
listing or a write shows it in a state not checked before; a drifted object is applied again (server-side,
taking the operator's fields back) and, when someone else's fields remain (an added env var), replaced.

Order: bundle ConfigMaps and the token Secret, then NetworkPolicies, ServiceAccounts, Services, and
Deployments last; any failure stops there, so no workload starts unprotected or half-configured. Children
no longer rendered are deleted workloads first, NetworkPolicies last.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_operator.bundle import bundle_stem, bundle_tampering
from agent_operator.drift import SERVER_DEFAULTED, drift, fingerprint, projection
from agent_operator.kube import ApiError, KubeApi, object_path
from agent_operator.render import (
    AGENT_LABEL,
    APPLIED_HASH,
    COMPONENT_LABEL,
    COMPONENTS,
    MANAGED_BY,
    ROLE_LABEL,
    Desired,
)
from agent_operator.settings import FIELD_MANAGER
from agent_operator.status import DeploymentState

log = logging.getLogger("agent_operator")

AgentKey = tuple[str, str]  # namespace, name
MemoKey = tuple[str, str, str, str]  # namespace, apiVersion, kind, name
MANAGED_KINDS = (
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "ServiceAccount"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
)
APPLY_ORDER = {
    "ConfigMap": 0,
    "Secret": 1,
    "NetworkPolicy": 2,
    "ServiceAccount": 3,
    "Service": 4,
    "Deployment": 5,
}
CREATED = "created"  # the memo of a create-only object (bundle ConfigMap, token Secret) known to exist


class ApplyError(Exception):
    """A write the API server refused, naming the object (the Status message carries no Secret value)."""

    def __init__(self, *, verb: str, kind: str, name: str, error: ApiError) -> None:
        super().__init__(f"could not {verb} {kind} {name}: {error.status} {error.message}")
        self.kind = kind
        self.name = name
        self.error = error


class Superseded(Exception):
    """The Agent was deleted (or replaced) while its reconcile ran: stop writing."""


@dataclass(frozen=True)
class Repair:
    """A child put back after a change made outside the operator (paths only, never values)."""

    kind: str
    name: str
    paths: tuple[str, ...]

    def describe(self) -> str:
        shown = ", ".join(self.paths[:5]) + (" ..." if len(self.paths) > 5 else "")
        return f"{self.kind} {self.name}: reverted a change made outside the operator ({shown})"


class ChildWriter:
    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.applied: dict[MemoKey, str] = {}  # the applied-hash (or CREATED) the live object carries
        self.verified: dict[MemoKey, str] = {}  # fingerprint of the live object last seen to hold it
        self.suspect: dict[MemoKey, dict[str, Any]] = {}  # live projections not yet checked
        self.bundle_versions: dict[MemoKey, str] = {}  # resourceVersion of bundle ConfigMaps we wrote
        self.owned: dict[AgentKey, set[MemoKey]] = {}
        self.bundle_maps: dict[AgentKey, set[str]] = {}  # bundle ConfigMaps per Agent
        self.current_bundles: dict[AgentKey, set[str]] = {}
        self.clean_bundles: dict[AgentKey, str] = {}  # digest after which no superseded bundle remained
        self.tampered: set[MemoKey] = set()  # bundle ConfigMaps whose content does not match their name
        self.deployments: dict[AgentKey, dict[str, DeploymentState]] = {}
        self._primed: set[str] = set()
        self._prime_locks: dict[str, asyncio.Lock] = {}

    # --- what the namespace holds ------------------------------------------------------------------------

    def forget_agent(self, key: AgentKey) -> None:
        for memo in self.owned.pop(key, set()):
            for store in (self.applied, self.verified, self.suspect, self.bundle_versions):
                store.pop(memo, None)
        for store in (self.bundle_maps, self.current_bundles, self.clean_bundles, self.deployments):
            store.pop(key, None)

    def forget_all(self) -> None:
        """Drop what was learnt; the next reconcile per namespace lists again (a resync)."""
        for store in (self.applied, self.verified, self.suspect, self.bundle_versions, self.owned):
            store.clear()
        self.bundle_maps.clear()
        self.clean_bundles.clear()
        self._primed.clear()

    async def prime(self, ns: str) -> None:
        """Learn every object this operator manages in `ns` with one LIST per kind (once per namespace)."""
        async with self._prime_locks.setdefault(ns, asyncio.Lock()):
            if ns in self._primed:
                return
            selector = f"app.kubernetes.io/managed-by={MANAGED_BY}"
            bundles: dict[tuple[str, str], dict[str, dict[str, str]]] = {}  # (stem, digest) -> parts
            for api_version, kind in MANAGED_KINDS:
                for item in await self.api.list(object_path(api_version, kind, ns), label_selector=selector):
                    self._learn(ns, api_version, kind, item, listed=True)
                    name = item["metadata"]["name"]
                    role = (item["metadata"].get("labels") or {}).get(ROLE_LABEL)
                    if role == "bundle" and (stem := bundle_stem(name)) is not None:
                        bundles.setdefault(stem, {})[name] = item.get("data") or {}
            for (stem, digest), parts in bundles.items():
                files = {k: v for data in parts.values() for k, v in data.items()}
                if (problem := bundle_tampering(files, digest_prefix=digest)) is not None:
                    log.warning(
                        "bundle ConfigMap tampered with",
                        extra={"namespace": ns, "bundle": stem, "problem": problem},
                    )
                    for name in parts:  # not ours as it stands: replaced when current, else deleted
                        self.applied.pop((ns, "v1", "ConfigMap", name), None)
                        self.bundle_versions.pop((ns, "v1", "ConfigMap", name), None)
                        self.tampered.add((ns, "v1", "ConfigMap", name))
            self._primed.add(ns)

    def _learn(self, ns: str, api_version: str, kind: str, item: dict[str, Any], *, listed: bool) -> None:
        meta = item["metadata"]
        labels = meta.get("labels") or {}
        agent = labels.get(AGENT_LABEL, "")
        role = labels.get(ROLE_LABEL)
        memo = (ns, api_version, kind, meta["name"])
        self.owned.setdefault((ns, agent), set()).add(memo)
        if role in ("bundle", "runtime-token"):
            self.applied[memo] = CREATED
            if role == "bundle":
                self.bundle_maps.setdefault((ns, agent), set()).add(meta["name"])
                self.bundle_versions[memo] = meta.get("resourceVersion", "")
            return
        self.applied[memo] = (meta.get("annotations") or {}).get(APPLIED_HASH, "")
        if listed:  # not checked against the rendering yet: the Agent's next reconcile does that
            self.suspect[memo] = projection(item)
        if kind == "Deployment" and labels.get(COMPONENT_LABEL) in COMPONENTS:
            self.deployments.setdefault((ns, agent), {})[labels[COMPONENT_LABEL]] = DeploymentState.from_body(
                item
            )

    def observe(self, api_version: str, kind: str, body: dict[str, Any]) -> bool:
        """A watched child as it is now: True when it is in a state not checked against the rendering."""
        meta = body.get("metadata") or {}
        labels = meta.get("labels") or {}
        memo = (meta.get("namespace", ""), api_version, kind, meta.get("name", ""))
        if kind == "Deployment" and labels.get(COMPONENT_LABEL) in COMPONENTS:
            key = (memo[0], labels.get(AGENT_LABEL, ""))
            self.deployments.setdefault(key, {})[labels[COMPONENT_LABEL]] = DeploymentState.from_body(body)
        if memo not in self.applied:
            return False  # not learnt yet (listing pending) or not ours
        if memo in self.suspect:  # listed, and the Agent's coming reconcile checks it: keep it current
            self.suspect[memo] = projection(body)
            return False
        if self.verified.get(memo) == fingerprint(body):
            return False  # status churn, or our own write
        self.suspect[memo] = projection(body)
        return True

    def child_deleted(self, memo: MemoKey, *, labels: Mapping[str, str]) -> None:
        """A child deleted behind our back: forget it, so the next reconcile creates it again."""
        for store in (self.applied, self.verified, self.suspect, self.bundle_versions):
            store.pop(memo, None)
        component = labels.get(COMPONENT_LABEL)
        if memo[2] == "Deployment" and component in COMPONENTS:
            self.deployments.get((memo[0], labels.get(AGENT_LABEL, "")), {}).pop(component, None)

    async def deployment_states(self, key: AgentKey) -> dict[str, DeploymentState | None]:
        await self.prime(key[0])  # afterwards the Deployment watch keeps these current
        states = self.deployments.get(key, {})
        return {c: states.get(c) for c in COMPONENTS}

    # --- applying -----------------------------------------------------------------------------------------

    async def apply(
        self, key: AgentKey, objects: Sequence[Desired], *, current: Callable[[], bool]
    ) -> list[Repair]:
        """Converge the Agent's children on `objects`; `current()` is checked before every write (False:
        the Agent is being deleted, raise Superseded). Returns what was put back after hand edits."""
        ns = key[0]
        await self.prime(ns)
        repairs: list[Repair] = []
        self.current_bundles[key] = {
            d.key[2] for d in objects if d.manifest["kind"] == "ConfigMap" and d.create_only
        }
        for desired in sorted(objects, key=lambda d: APPLY_ORDER.get(d.manifest["kind"], 9)):
            api_version, kind, name = desired.key
            memo = (ns, api_version, kind, name)
            self.owned.setdefault(key, set()).add(memo)
            if desired.create_only:
                if self.applied.get(memo) != CREATED:
                    repairs += await self._create(memo, desired, current=current)
                continue
            want = desired.manifest["metadata"]["annotations"][APPLIED_HASH]
            live = self.suspect.pop(memo, None)
            paths: list[str] = []
            if self.applied.get(memo) == want:
                if live is None:
                    continue
                paths = drift(desired.manifest, live)
                if not paths:
                    self.verified[memo] = fingerprint(live)
                    continue
            left = await self._apply_one(memo, desired.manifest, current=current)
            if paths or left:
                repairs.append(Repair(kind, name, tuple(paths or left)))
        await self._delete_unwanted(key, objects, current=current)
        return repairs

    async def _apply_one(
        self, memo: MemoKey, manifest: dict[str, Any], *, current: Callable[[], bool]
    ) -> list[str]:
        """Server-side apply; when fields of other managers still make it drift, replace the object.
        Returns the drifted paths a replace removed (empty when the apply alone converged)."""
        ns, api_version, kind, name = memo
        path = object_path(api_version, kind, ns, name)
        _check(current)
        try:
            result = await self.api.apply(path, manifest, field_manager=FIELD_MANAGER)
        except ApiError as exc:
            raise ApplyError(verb="apply", kind=kind, name=name, error=exc) from exc
        left = drift(manifest, projection(result))
        if left:
            result = await self._replace(memo, manifest, result, current=current)
            if still := drift(manifest, projection(result)):
                log.warning(
                    "child still differs after a replace",
                    extra={"object": f"{kind}/{name}", "paths": still[:10]},
                )
        self._learn(ns, api_version, kind, result, listed=False)
        self.verified[memo] = fingerprint(result)
        return left

    async def _replace(
        self, memo: MemoKey, manifest: dict[str, Any], live: dict[str, Any], *, current: Callable[[], bool]
    ) -> dict[str, Any]:
        """PUT the rendering over the live object; on a conflict (a controller wrote meanwhile) read it
        again and retry."""
        ns, api_version, kind, name = memo
        path = object_path(api_version, kind, ns, name)
        for attempt in range(3):
            _check(current)
            try:
                return await self.api.update(path, _replacement(manifest, live), field_manager=FIELD_MANAGER)
            except ApiError as exc:
                if exc.status != 409 or attempt == 2:
                    raise ApplyError(verb="replace", kind=kind, name=name, error=exc) from exc
            fresh = await self.api.get(path)
            if fresh is None:
                raise ApplyError(verb="replace", kind=kind, name=name, error=ApiError(404, "gone meanwhile"))
            live = fresh
        raise AssertionError("unreachable")

    async def _create(self, memo: MemoKey, desired: Desired, *, current: Callable[[], bool]) -> list[Repair]:
        """Create a create-only object; one of that name already there must hold exactly the rendering
        (a bundle ConfigMap replaced by someone is deleted and created again)."""
        ns, api_version, kind, name = memo
        body = dict(desired.manifest)
        if desired.generate_token:
            body["stringData"] = {"token": secrets.token_urlsafe(32)}
        collection = object_path(api_version, kind, ns)
        _check(current)
        try:
            created = await self.api.create(collection, body, field_manager=FIELD_MANAGER)
            repairs: list[Repair] = []
            if created is None and kind == "ConfigMap":
                existing = await self.api.get(object_path(api_version, kind, ns, name))
                if existing is not None and (existing.get("data") or {}) != desired.manifest.get("data"):
                    _check(current)
                    await self.api.delete(object_path(api_version, kind, ns, name))
                    created = await self.api.create(collection, body, field_manager=FIELD_MANAGER)
                    repairs.append(Repair(kind, name, ("data",)))
                else:
                    created = existing
        except ApiError as exc:
            raise ApplyError(verb="create", kind=kind, name=name, error=exc) from exc
        self.tampered.discard(memo)
        self._learn(ns, api_version, kind, created or desired.manifest, listed=False)
        return repairs

    async def _delete_unwanted(
        self, key: AgentKey, objects: Sequence[Desired], *, current: Callable[[], bool]
    ) -> None:
        """Children no longer rendered (e.g. Memory's after it was disabled): workloads first."""
        ns = key[0]
        wanted = {(ns, *d.key) for d in objects}
        bundles = {(ns, "v1", "ConfigMap", name) for name in self.bundle_maps.get(key, set())}
        unwanted = sorted(
            self.owned.get(key, set()) - wanted - bundles, key=lambda m: -APPLY_ORDER.get(m[2], 9)
        )
        for memo in unwanted:
            _, api_version, kind, name = memo
            _check(current)
            try:
                await self.api.delete(object_path(api_version, kind, ns, name))
            except ApiError as exc:
                raise ApplyError(verb="delete", kind=kind, name=name, error=exc) from exc
            for store in (self.applied, self.verified, self.suspect):
                store.pop(memo, None)
            self.owned.get(key, set()).discard(memo)
            if kind == "Deployment":
                self.deployments.get(key, {}).pop(name.rsplit("-", 1)[-1], None)

    async def collect_bundles(self, key: AgentKey, *, keep: set[str], digest: str) -> None:
        """Delete superseded bundle ConfigMaps that no ReplicaSet with pods still mounts."""
        if self.clean_bundles.get(key) == digest:
            return
        ns, agent = key
        stale = sorted(self.bundle_maps.get(key, set()) - keep)
        if not stale:
            self.clean_bundles[key] = digest
            return
        in_use: set[str] = set()
        for rs in await self.api.list(
            object_path("apps/v1", "ReplicaSet", ns), label_selector=f"{AGENT_LABEL}={agent}"
        ):
            if not ((rs.get("spec") or {}).get("replicas") or (rs.get("status") or {}).get("replicas")):
                continue
            for volume in rs["spec"]["template"]["spec"].get("volumes") or []:
                for source in (volume.get("projected") or {}).get("sources") or []:
                    if "configMap" in source:
                        in_use.add(source["configMap"]["name"])
        for name in stale:
            if name not in in_use or (ns, "v1", "ConfigMap", name) in self.tampered:
                await self.api.delete(object_path("v1", "ConfigMap", ns, name))
                self._forget_bundle(key, name)
        if not set(stale) & self.bundle_maps.get(key, set()):
            self.clean_bundles[key] = digest

    def _forget_bundle(self, key: AgentKey, name: str) -> None:
        memo = (key[0], "v1", "ConfigMap", name)
        self.applied.pop(memo, None)
        self.bundle_versions.pop(memo, None)
        self.tampered.discard(memo)
        self.bundle_maps.get(key, set()).discard(name)

    async def bundle_changed(self, key: AgentKey, name: str, *, resource_version: str, deleted: bool) -> bool:
        """A bundle ConfigMap of `key` seen by the metadata watch. True when the Agent must reconcile (its
        current bundle is gone or not the one we wrote). A superseded bundle changed by someone else is
        deleted when its content does not match the digest in its name."""
        ns = key[0]
        memo = (ns, "v1", "ConfigMap", name)
        current = name in self.current_bundles.get(key, set())
        if deleted:
            self._forget_bundle(key, name)
            self.clean_bundles.pop(key, None)
            return current
        if self.bundle_versions.get(memo) == resource_version:
            return False  # the one we created or listed
        if current:
            self.applied.pop(memo, None)  # the reconcile checks its content against the rendering
            return True
        if name not in self.bundle_maps.get(key, set()):
            return False  # not one we made: not ours to judge
        stem = bundle_stem(name)
        body = await self.api.get(object_path("v1", "ConfigMap", ns, name))
        if stem is None or body is None:
            return False
        parts = [body] + [
            part
            for other in sorted(self.bundle_maps.get(key, set()) - {name})
            if bundle_stem(other) == stem
            and (part := await self.api.get(object_path("v1", "ConfigMap", ns, other)))
        ]
        files = {k: v for part in parts for k, v in (part.get("data") or {}).items()}
        problem = bundle_tampering(files, digest_prefix=stem[1])
        if problem is None:
            self.bundle_versions[memo] = resource_version
            return False
        log.warning(
            "superseded bundle ConfigMap tampered with; deleting it",
            extra={"namespace": ns, "configMap": name, "problem": problem},
        )
        await self.api.delete(object_path("v1", "ConfigMap", ns, name))
        self._forget_bundle(key, name)
        return False


def _check(current: Callable[[], bool]) -> None:
    if not current():
        raise Superseded


def _replacement(manifest: Mapping[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    """The body of a replace (PUT): the rendering, on top of the live object's identity, others' labels and
    annotations, and what the API server allocated (a Service's cluster IPs)."""
    meta = live.get("metadata") or {}
    want = manifest["metadata"]
    body: dict[str, Any] = {
        **{k: v for k, v in manifest.items() if k != "metadata"},
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "resourceVersion": meta.get("resourceVersion"),
            "labels": {**(meta.get("labels") or {}), **(want.get("labels") or {})},
            "annotations": {**(meta.get("annotations") or {}), **(want.get("annotations") or {})},
            "ownerReferences": want.get("ownerReferences") or [],
        },
    }
    spec, live_spec = body.get("spec"), live.get("spec")
    if isinstance(spec, dict) and isinstance(live_spec, Mapping):
        body["spec"] = {
            **{k: v for k, v in live_spec.items() if k in SERVER_DEFAULTED and k not in spec},
            **spec,
        }
    return body
