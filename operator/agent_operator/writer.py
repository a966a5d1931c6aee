"""Applying an Agent's children: write only what differs, in an order that never leaves a pod unprotected,
and put back what someone changed by hand.

What the namespace holds is learnt with one LIST per kind per namespace, then kept current by our own writes
and the watches; a resync forgets it and lists again. Every applied object carries the hash of its rendered
content (`agentengine.io/applied-hash`), so an unchanged rendering costs no write. A hand edit leaves that
hash alone, so the live object itself is checked against the rendering (drift.py) whenever a watch, a
listing or a write shows it in a state not checked before; a drifted object is applied again (server-side,
taking the operator's fields back) and, when someone else's fields remain (an added env var), replaced.

Order: everything a pod needs (bundle ConfigMaps, the token Secret, NetworkPolicies, ServiceAccounts,
Services) concurrently, then the Deployments; any failure stops there, so no workload starts unprotected or
half-configured. Children no longer rendered are deleted workloads first, NetworkPolicies last.

Objects shared by the namespace's Agents (shared.py) are written by whichever Agent needs them first (one
lock per object, so a thousand Agents starting at once write it once) and deleted by `collect_garbage` once
no Agent renders them and no pod uses them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_operator.adoption import claim, controller_of, name_taken_message
from agent_operator.bundle import bundle_stem, bundle_tampering
from agent_operator.drift import SERVER_DEFAULTED, drift, fingerprint, generation_key, projection
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
from agent_operator.shared import SHARED_LABEL, garbage, held_by_workloads
from agent_operator.status import DeploymentState
from agent_runtime import contract
from agent_runtime.oe.registration import REGISTRATION_LABEL

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
    ("policy/v1", "PodDisruptionBudget"),
)
APPLY_ORDER = {
    "ConfigMap": 0,
    "Secret": 1,
    "NetworkPolicy": 2,
    "ServiceAccount": 3,
    "Service": 4,
    "PodDisruptionBudget": 4,
    "Deployment": 5,
}
WATCH_LISTING_SECONDS = 30.0  # how long a first prime waits for the child watches' first listing
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


class NameTaken(Exception):
    """A child's name is held by an object the operator may not take: nothing of the Agent is applied."""

    def __init__(self, message: str, *, reason: str = "NameTaken") -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Repair:
    """A child put back after a change made outside the operator (paths only, never values), or taken over
    (`reason`, `message`: an orphaned or foreign token Secret given a fresh token)."""

    kind: str
    name: str
    paths: tuple[str, ...]
    reason: str = "ChildRepaired"
    message: str = ""
    type_: str = "Warning"

    def describe(self) -> str:
        if self.message:
            return self.message
        shown = ", ".join(self.paths[:5]) + (" ..." if len(self.paths) > 5 else "")
        return f"{self.kind} {self.name}: reverted a change made outside the operator ({shown})"


class ChildWriter:
    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.applied: dict[MemoKey, str] = {}  # the applied-hash (or CREATED) the live object carries
        self.verified: dict[MemoKey, str] = {}  # fingerprint of the live object last seen to hold it
        self.generations: dict[MemoKey, tuple[Any, ...]] = {}  # drift.generation_key of it (Deployments)
        # Live projections not yet checked, as compact JSON: after a restart there is one per child (5,000 for
        # 1,000 Agents) until each Agent reconciles, and as dicts they were most of the operator's memory.
        self.suspect: dict[MemoKey, bytes] = {}
        self.bundle_versions: dict[MemoKey, str] = {}  # resourceVersion of bundle ConfigMaps we wrote
        self.owned: dict[AgentKey, set[MemoKey]] = {}  # each Agent's own children
        self.users: dict[MemoKey, set[AgentKey]] = {}  # shared object -> the Agents whose rendering has it
        self.uses: dict[AgentKey, set[MemoKey]] = {}  # the reverse
        self.shared_live: dict[str, set[MemoKey]] = {}  # shared objects (and bundles) known to exist, per ns
        self.pending: set[str] = set()  # namespaces with shared objects that may have lost their last user
        self.tampered: set[MemoKey] = set()  # bundle ConfigMaps whose content does not match their name
        self.deployments: dict[AgentKey, dict[str, DeploymentState]] = {}
        # Each Agent's runtime token as created or listed here: (resourceVersion, token); never logged.
        self.tokens: dict[AgentKey, tuple[str, str]] = {}
        # The uid of the Agent controlling each token Secret as listed ("" for none): only a Secret its own
        # Agent controls is used as it is (one made by someone else, or orphaned, gets a fresh token).
        self.token_owners: dict[MemoKey, str] = {}
        self._primed: set[str] = set()
        self._prime_locks: dict[str, asyncio.Lock] = {}
        # Kinds whose first listing the child watches do (calling `learn`), and when it is complete.
        self._watched: tuple[frozenset[str], asyncio.Event] | None = None
        self._shared_locks: dict[MemoKey, asyncio.Lock] = {}

    # --- what the namespace holds ------------------------------------------------------------------------

    def forget_agent(self, key: AgentKey) -> None:
        """The Agent is gone: its children go with it (ownerReferences); its shared objects may be unused."""
        for memo in self.owned.pop(key, set()):
            for store in (self.applied, self.verified, self.generations, self.suspect, self.bundle_versions):
                store.pop(memo, None)
            self.token_owners.pop(memo, None)
        self.deployments.pop(key, None)
        self.tokens.pop(key, None)
        self._use(key, set())

    def forget_all(self) -> None:
        """Drop what was learnt of live objects; the next reconcile per namespace lists again (a resync).
        Who uses which shared object is kept: it comes from renderings, not from the cluster."""
        for store in (
            self.applied,
            self.verified,
            self.generations,
            self.suspect,
            self.bundle_versions,
            self.owned,
            self.token_owners,
        ):
            store.clear()
        self.shared_live.clear()
        self._primed.clear()
        self._watched = None  # the watches do not list again: the next prime lists every kind

    def _use(self, key: AgentKey, memos: set[MemoKey]) -> None:
        """Record the shared objects `key` renders now; one it dropped may have lost its last user."""
        previous = self.uses.pop(key, set())
        for memo in previous - memos:
            users = self.users.get(memo, set())
            users.discard(key)
            if not users:
                self.users.pop(memo, None)
                self.pending.add(memo[0])
        for memo in memos:
            self.users.setdefault(memo, set()).add(key)
        if memos:
            self.uses[key] = memos

    def users_of(self, memo: MemoKey) -> list[AgentKey]:
        return sorted(self.users.get(memo, ()))

    def _shared_lock(self, memo: MemoKey) -> asyncio.Lock:
        return self._shared_locks.setdefault(memo, asyncio.Lock())

    def follow(self, kinds: frozenset[str], listed: asyncio.Event) -> None:
        """Watches list the children of `kinds` and hand each to `learn`; the first prime waits for `listed`
        rather than listing them again (a restart with 1,000 Agents would hold 2,000 Deployments twice)."""
        self._watched = (kinds, listed)

    def learn(self, api_version: str, kind: str, item: dict[str, Any]) -> None:
        """A child from a watch's first listing: as if listed by `prime`."""
        self._learn(item["metadata"].get("namespace", ""), api_version, kind, item, listed=True)

    async def prime(self, ns: str) -> None:
        """Learn every object this operator manages in `ns` with one LIST per kind (once per namespace)."""
        async with self._prime_locks.setdefault(ns, asyncio.Lock()):
            if ns in self._primed:
                return
            selector = f"app.kubernetes.io/managed-by={MANAGED_BY}"
            bundles: dict[tuple[str, str], dict[str, dict[str, str]]] = {}  # (stem, digest) -> parts
            kinds = MANAGED_KINDS
            if self._watched is not None:
                try:
                    await asyncio.wait_for(self._watched[1].wait(), timeout=WATCH_LISTING_SECONDS)
                    kinds = tuple(k for k in MANAGED_KINDS if k[1] not in self._watched[0])
                except TimeoutError:  # a watch cannot list (yet): never wait for it forever
                    log.warning(
                        "the child watches have not listed yet; listing here", extra={"namespace": ns}
                    )
            for api_version, kind in kinds:
                path = object_path(api_version, kind, ns)
                async for items, _ in self.api.pages(path, label_selector=selector):  # a page at a time
                    for item in items:
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
        if labels.get(REGISTRATION_LABEL) == "true":
            # An OE registration (publisher.py), in an Agent namespace when the OE runs there: labelled with
            # the Agent's name, yet no child of it. Taken for one, it was deleted as unwanted (issue 43).
            return
        agent = labels.get(AGENT_LABEL, "")
        role = labels.get(ROLE_LABEL)
        memo = (ns, api_version, kind, meta["name"])
        if labels.get(SHARED_LABEL) == "true" or role == "bundle":  # (per-Agent bundles of older operators)
            self.shared_live.setdefault(ns, set()).add(memo)
        else:
            self.owned.setdefault((ns, agent), set()).add(memo)
        if role in ("bundle", "runtime-token"):
            self.applied[memo] = CREATED
            if role == "bundle":
                self.bundle_versions[memo] = meta.get("resourceVersion", "")
                return
            owner = controller_of(meta)
            owner_uid = owner.get("uid", "") if owner is not None and owner.get("kind") == "Agent" else ""
            self.token_owners[memo] = owner_uid
            if owner_uid and (token := (item.get("data") or {}).get(contract.TOKEN_SECRET_KEY)):
                self.tokens[(ns, agent)] = (meta.get("resourceVersion", ""), base64.b64decode(token).decode())
            return
        self.applied[memo] = (meta.get("annotations") or {}).get(APPLIED_HASH, "")
        if listed:  # not checked against the rendering yet: the Agent's next reconcile does that
            self.suspect[memo] = _packed(item)
        # A Deployment's state comes from listings and the watch only: the answer to our own write can
        # arrive after the watch already told a later state (a rollout KWOK finished at once), and must
        # not overwrite it.
        if listed and kind == "Deployment" and labels.get(COMPONENT_LABEL) in COMPONENTS:
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
            self.suspect[memo] = _packed(body)
            return False
        if kind == "Deployment" and self.generations.get(memo) == generation_key(body):
            return False  # a rollout's status update
        if self.verified.get(memo) == fingerprint(body):
            return False  # status churn, or our own write
        self.suspect[memo] = _packed(body)
        return True

    def _verified(self, memo: MemoKey, live: dict[str, Any]) -> None:
        """`live` holds the rendering: what its later states are compared with."""
        self.verified[memo] = fingerprint(live)
        if memo[2] == "Deployment":
            self.generations[memo] = generation_key(live)

    def child_deleted(self, memo: MemoKey, *, labels: Mapping[str, str]) -> None:
        """A child deleted behind our back: forget it, so the next reconcile creates it again."""
        for store in (self.applied, self.verified, self.generations, self.suspect, self.bundle_versions):
            store.pop(memo, None)
        self.shared_live.get(memo[0], set()).discard(memo)
        if labels.get(ROLE_LABEL) == "runtime-token" or memo[3].endswith("-runtime-token"):
            self.tokens.pop(
                (memo[0], labels.get(AGENT_LABEL) or memo[3].removesuffix("-runtime-token")), None
            )
            self.token_owners.pop(memo, None)
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
        # Before any await: from here on, garbage collection sees these shared objects as in use.
        self._use(key, {(ns, *d.key) for d in objects if d.shared})
        await self.prime(ns)
        repairs = await self._claim_names(key, objects, current=current)
        for stage in (
            [d for d in objects if d.manifest["kind"] != "Deployment"],
            [d for d in objects if d.manifest["kind"] == "Deployment"],
        ):
            results = await asyncio.gather(
                *(self._converge_one(key, d, current=current) for d in stage), return_exceptions=True
            )
            for result in results:  # every write of the stage has ended; the first failure stops here
                if isinstance(result, BaseException):
                    raise result
                repairs += result
        await self._delete_unwanted(key, objects, current=current)
        return repairs

    async def _claim_names(
        self, key: AgentKey, objects: Sequence[Desired], *, current: Callable[[], bool]
    ) -> list[Repair]:
        """Before any write: every own child this process does not know as the Agent's is read (one GET
        each, only for children never seen: a new Agent, one re-created, a token Secret not controlled by
        this Agent). One another owner holds stops everything (NameTaken); an orphan is adopted; a token
        Secret its Agent does not control gets a fresh token, so its author's token is never used."""
        ns = key[0]
        unknown = [d for d in objects if not d.shared and self._unknown((ns, *d.key), d)]
        if not unknown:
            return []
        lives = await asyncio.gather(*(self.api.get(object_path(*_split(ns, d))) for d in unknown))
        holders: list[str] = []
        tokens: list[tuple[Desired, dict[str, Any], bool]] = []
        for desired, live in zip(unknown, lives, strict=True):
            if live is None:
                continue
            kind, uid = desired.manifest["kind"], _owner_uid(desired.manifest)
            verdict = claim(live, kind=kind, agent=key[1], agent_uid=uid)
            if desired.generate_token:
                if verdict.verdict == "taken":
                    holders.append(verdict.holder)
                elif verdict.verdict == "ours":
                    self._learn(ns, "v1", kind, live, listed=True)
                else:  # orphaned, or made by someone else: a fresh token, never theirs
                    tokens.append((desired, live, verdict.verdict == "foreign"))
            elif verdict.verdict in ("taken", "foreign"):
                holders.append(verdict.holder)
            else:  # ours, or an orphan: checked against the rendering (its owner put back) like a listed one
                self._learn(ns, *desired.key[:2], live, listed=True)
        if holders:
            raise NameTaken(name_taken_message(holders))
        repairs: list[Repair] = []
        for desired, live, foreign in tokens:
            repairs.append(await self._take_token(key, desired, live, foreign=foreign, current=current))
        return repairs

    def _unknown(self, memo: MemoKey, desired: Desired) -> bool:
        if desired.generate_token:
            return self.applied.get(memo) != CREATED or self.token_owners.get(memo) != _owner_uid(
                desired.manifest
            )
        return memo not in self.applied

    async def _take_token(
        self,
        key: AgentKey,
        desired: Desired,
        live: dict[str, Any],
        *,
        foreign: bool,
        current: Callable[[], bool],
    ) -> Repair:
        """Replace a token Secret this Agent does not control with the rendering and a fresh token."""
        ns, (api_version, kind, name) = key[0], desired.key
        meta = live.get("metadata") or {}
        body = {
            **desired.manifest,
            "metadata": {**desired.manifest["metadata"], "resourceVersion": meta.get("resourceVersion")},
            "stringData": {contract.TOKEN_SECRET_KEY: secrets.token_urlsafe(32)},
        }
        _check(current)
        try:
            result = await self.api.update(
                object_path(api_version, kind, ns, name), body, field_manager=FIELD_MANAGER
            )
        except ApiError as exc:
            if exc.status in (401, 403, 422):  # not allowed, or a type that cannot change
                raise NameTaken(
                    f"Secret {name} exists and was not made for this Agent by the operator; its token is not "
                    f"used, and the operator may not replace it (HTTP {exc.status}): delete it, and the "
                    "operator creates its own",
                    reason="TokenSecretForeign",
                ) from exc
            raise ApplyError(verb="replace", kind=kind, name=name, error=exc) from exc
        self._learn(ns, api_version, kind, result, listed=False)
        self.owned.setdefault(key, set()).add((ns, api_version, kind, name))
        if foreign:
            log.warning(
                "foreign runtime token Secret replaced",
                extra={"namespace": ns, "secret": name, "agent": key[1]},
            )
            return Repair(
                kind,
                name,
                ("data",),
                reason="TokenSecretReplaced",
                message=f"Secret {name} existed before this Agent and was not made by the operator "
                "(no owner, not its labels): its token was never used; the operator wrote a fresh token "
                "and owns it now",
            )
        log.info("orphaned runtime token Secret adopted", extra={"namespace": ns, "secret": name})
        return Repair(
            kind,
            name,
            ("metadata.ownerReferences", "data"),
            reason="TokenSecretAdopted",
            message=f"Secret {name} had lost its owner (an Agent deleted with --cascade=orphan): adopted, "
            "with a fresh token (the runtimes accept the previous one for their grace period)",
            type_="Normal",
        )

    async def _converge_one(
        self, key: AgentKey, desired: Desired, *, current: Callable[[], bool]
    ) -> list[Repair]:
        memo = (key[0], *desired.key)
        if desired.shared:
            async with self._shared_lock(memo):  # the first Agent writes it; the others find it done
                return await self._converge(memo, desired, current=current)
        self.owned.setdefault(key, set()).add(memo)
        return await self._converge(memo, desired, current=current)

    async def _converge(
        self, memo: MemoKey, desired: Desired, *, current: Callable[[], bool]
    ) -> list[Repair]:
        if desired.create_only:
            if self.applied.get(memo) != CREATED:
                return await self._create(memo, desired, current=current)
            return []
        want = desired.manifest["metadata"]["annotations"][APPLIED_HASH]
        packed = self.suspect.pop(memo, None)
        live = None if packed is None else json.loads(packed)
        paths: list[str] = []
        if self.applied.get(memo) == want:
            if live is None:
                return []
            paths = drift(desired.manifest, live)
            if not paths:
                self._verified(memo, live)
                return []
        left = await self._apply_one(memo, desired.manifest, current=current)
        if paths or left:
            return [Repair(memo[2], memo[3], tuple(paths or left))]
        return []

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
            # Merged with fields another manager set, the rendering can make an invalid object (our
            # allowPrivilegeEscalation: false beside a hand-set privileged: true): replace it whole.
            live = await self.api.get(path) if exc.status == 422 and memo in self.applied else None
            if live is None:
                raise ApplyError(verb="apply", kind=kind, name=name, error=exc) from exc
            log.warning(
                "server-side apply refused over a hand edit; replacing the object",
                extra={"object": f"{kind}/{name}", "error": exc.message[:300]},
            )
            result = await self._replace(memo, manifest, live, current=current)
            left = drift(manifest, projection(live)) or ["spec"]
            self._learn(ns, api_version, kind, result, listed=False)
            self._verified(memo, result)
            return left
        left = drift(manifest, projection(result))
        if left:
            result = await self._replace(memo, manifest, result, current=current)
            if still := drift(manifest, projection(result)):
                log.warning(
                    "child still differs after a replace",
                    extra={"object": f"{kind}/{name}", "paths": still[:10]},
                )
        self._learn(ns, api_version, kind, result, listed=False)
        self._verified(memo, result)
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
            body["stringData"] = {contract.TOKEN_SECRET_KEY: secrets.token_urlsafe(32)}
        collection = object_path(api_version, kind, ns)
        _check(current)
        try:
            created = await self.api.create(collection, body, field_manager=FIELD_MANAGER)
            repairs: list[Repair] = []
            if created is None and desired.generate_token:
                # Made by someone between our read and this create: judged by the next attempt's read.
                raise ApplyError(verb="create", kind=kind, name=name, error=ApiError(409, "already exists"))
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
        unwanted = sorted(self.owned.get(key, set()) - wanted, key=lambda m: -APPLY_ORDER.get(m[2], 9))
        for memo in unwanted:
            _, api_version, kind, name = memo
            _check(current)
            try:
                await self.api.delete(object_path(api_version, kind, ns, name))
            except ApiError as exc:
                raise ApplyError(verb="delete", kind=kind, name=name, error=exc) from exc
            for store in (self.applied, self.verified, self.generations, self.suspect):
                store.pop(memo, None)
            self.owned.get(key, set()).discard(memo)
            if kind == "Deployment":
                self.deployments.get(key, {}).pop(name.rsplit("-", 1)[-1], None)

    # --- shared objects ---------------------------------------------------------------------------------

    def unused(self, ns: str) -> list[MemoKey]:
        """Shared objects of `ns` known to exist that no Agent's current rendering has."""
        return sorted(m for m in self.shared_live.get(ns, set()) if not self.users.get(m))

    async def collect_garbage(self, ns: str) -> None:
        """Delete the shared objects of `ns` that lost their last user and that no pod uses any more (one
        LIST of ReplicaSets, only when there is a candidate). Those still used stay pending: the next
        Deployment change or resync looks again."""
        self.pending.discard(ns)
        unused = {(m[2], m[3]): m for m in self.unused(ns)}
        if not unused:
            return
        replica_sets = await self.api.list(
            object_path("apps/v1", "ReplicaSet", ns),
            label_selector=f"app.kubernetes.io/managed-by={MANAGED_BY}",
        )
        tampered = {(m[2], m[3]) for m in self.tampered if m[0] == ns}
        for kind_name in garbage(unused=unused, held=held_by_workloads(replica_sets), tampered=tampered):
            memo = unused[kind_name]
            async with self._shared_lock(memo):
                if self.users.get(memo):
                    continue  # an Agent took it up meanwhile
                with contextlib.suppress(ApiError):  # already gone; another failure: the next round
                    await self.api.delete(object_path(memo[1], memo[2], ns, memo[3]))
                    log.info(
                        "shared object deleted", extra={"namespace": ns, "object": f"{memo[2]}/{memo[3]}"}
                    )
                self._forget_shared(memo)
        if self.unused(ns):
            self.pending.add(ns)

    def _forget_shared(self, memo: MemoKey) -> None:
        for store in (self.applied, self.verified, self.generations, self.suspect, self.bundle_versions):
            store.pop(memo, None)
        self.tampered.discard(memo)
        self.shared_live.get(memo[0], set()).discard(memo)

    async def bundle_changed(
        self, ns: str, name: str, *, resource_version: str, deleted: bool
    ) -> list[AgentKey]:
        """A bundle ConfigMap seen by the metadata watch: the Agents to reconcile (one user is enough: it
        puts the object back for all). A bundle no Agent uses that someone changed is deleted when its
        content no longer matches the digest in its name."""
        memo = (ns, "v1", "ConfigMap", name)
        users = self.users_of(memo)
        if deleted:
            self._forget_shared(memo)
            return users[:1]
        if self.bundle_versions.get(memo) == resource_version:
            return []  # the one we created or listed
        if users:
            self.applied.pop(memo, None)  # the reconcile checks its content against the rendering
            return users[:1]
        if memo not in self.shared_live.get(ns, set()):
            return []  # not one we made: not ours to judge
        stem = bundle_stem(name)
        body = await self.api.get(object_path("v1", "ConfigMap", ns, name))
        if stem is None or body is None:
            return []
        parts = [body] + [
            part
            for other in sorted(self.shared_live.get(ns, set()) - {memo})
            if other[2] == "ConfigMap"
            and bundle_stem(other[3]) == stem
            and (part := await self.api.get(object_path("v1", "ConfigMap", ns, other[3])))
        ]
        files = {k: v for part in parts for k, v in (part.get("data") or {}).items()}
        problem = bundle_tampering(files, digest_prefix=stem[1])
        if problem is None:
            self.bundle_versions[memo] = resource_version
            return []
        log.warning(
            "unused bundle ConfigMap tampered with; deleting it",
            extra={"namespace": ns, "configMap": name, "problem": problem},
        )
        async with self._shared_lock(memo):
            if not self.users.get(memo):
                await self.api.delete(object_path("v1", "ConfigMap", ns, name))
                self._forget_shared(memo)
        return []


def _split(ns: str, desired: Desired) -> tuple[str, str, str, str]:
    api_version, kind, name = desired.key
    return api_version, kind, ns, name


def _owner_uid(manifest: Mapping[str, Any]) -> str:
    owners = (manifest.get("metadata") or {}).get("ownerReferences") or [{}]
    return str(owners[0].get("uid", ""))


def _packed(live: Mapping[str, Any]) -> bytes:
    return json.dumps(projection(live), separators=(",", ":")).encode()


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
