"""The operator's Kubernetes I/O: read an Agent's inputs, apply its plan, report status and Events.

Writes happen only when something differs: every applied object carries the hash of its rendered content
(`agentengine.io/applied-hash`), compared with what the namespace holds (learnt with one LIST per kind per
namespace, then kept current by our own writes and the Deployment watch; a resync re-lists); status is
patched only when it changed; an Event is posted only when bad input is new. Bad input applies nothing, so
the last good bundle and Deployments stay in service.

API permissions the operator needs (the Helm chart's ClusterRole, or a Role per watched namespace):

| apiGroup          | resources                                   | verbs                                   |
|-------------------|---------------------------------------------|-----------------------------------------|
| agentengine.io    | agents, connectors                          | get, list, watch                        |
| agentengine.io    | agents/status, connectors/status            | get, patch, update                      |
| agentengine.io    | agents/finalizers                           | update (blockOwnerDeletion on children) |
| "" (core)         | configmaps                                  | get, list, watch, create, patch, delete |
| "" (core)         | secrets                                     | get, list, watch, create, patch         |
| "" (core)         | serviceaccounts, services                   | get, list, create, patch, delete        |
| "" (core)         | events                                      | create                                  |
| apps              | deployments                                 | get, list, watch, create, patch, delete |
| apps              | replicasets                                 | list                                    |
| networking.k8s.io | networkpolicies                             | get, list, create, patch, delete        |
| kopf.dev          | clusterkopfpeerings (cluster-wide) or       | get, list, watch, patch                 |
|                   | kopfpeerings (namespaced), only with        |                                         |
|                   | AGENT_OPERATOR_PEERING set                  |                                         |

Watches are scoped: Agents and Connectors; ConfigMaps and Secrets only with the label
`agentengine.io/watched=true` (the operator adds it, with a patch, to those an Agent or Connector
references; hence `patch` on secrets and configmaps); Deployments only with
`app.kubernetes.io/managed-by=agent-engine-operator`. Secret values are never read into logs, status or
hashes: a referenced Secret rolls its pods through a checksum of its resourceVersion.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import secrets
from collections.abc import Sequence
from typing import Any

from agent_operator.inputs import AgentInputs, InputProblem, SecretMeta, agent_references
from agent_operator.kube import ApiError, KubeApi, object_path
from agent_operator.models import API_VERSION, Agent, Connector
from agent_operator.reconcile import plan_agent, summarize_connector
from agent_operator.render import (
    AGENT_LABEL,
    APPLIED_HASH,
    COMPONENT_LABEL,
    COMPONENTS,
    MANAGED_BY,
    ROLE_LABEL,
    WATCHED_LABEL,
    Desired,
)
from agent_operator.settings import FIELD_MANAGER, OperatorSettings
from agent_operator.status import (
    DeploymentState,
    Outcome,
    agent_status,
    connector_status,
    status_changed,
    warning_event,
)

log = logging.getLogger("agent_operator")

AgentKey = tuple[str, str]  # namespace, name
MANAGED_KINDS = (
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "ServiceAccount"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Operator:
    """State the handlers share: what was applied, the latest Agent/Connector bodies, Deployment states."""

    def __init__(self, api: KubeApi, settings: OperatorSettings) -> None:
        self.api = api
        self.settings = settings
        self.agents: dict[AgentKey, dict[str, Any]] = {}
        self.connectors: dict[AgentKey, dict[str, Any]] = {}
        self.outcomes: dict[AgentKey, Outcome] = {}
        self.deployments: dict[AgentKey, dict[str, DeploymentState]] = {}
        self.applied: dict[tuple[str, str, str, str], str] = {}  # (ns, apiVersion, kind, name) -> hash
        self.clean_bundles: dict[AgentKey, str] = {}  # digest after which no superseded bundle remained
        self._locks: dict[AgentKey, asyncio.Lock] = {}
        self._connector_locks: dict[AgentKey, asyncio.Lock] = {}
        self._path_locks: dict[str, asyncio.Lock] = {}
        self._prime_locks: dict[str, asyncio.Lock] = {}
        self._primed: set[str] = set()
        self.bundle_maps: dict[AgentKey, set[str]] = {}  # bundle ConfigMaps per Agent
        self.owned: dict[AgentKey, set[tuple[str, str, str, str]]] = {}  # memo keys per Agent

    def _lock(self, key: AgentKey) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    # --- events from the watches -------------------------------------------------------------------------

    def forget_agent(self, key: AgentKey) -> None:
        for store in (
            self.agents,
            self.outcomes,
            self.deployments,
            self.clean_bundles,
            self.bundle_maps,
            self._locks,
        ):
            store.pop(key, None)
        for memo_key in self.owned.pop(key, set()):
            self.applied.pop(memo_key, None)

    def forget_applied(self) -> None:
        """Drop what was learnt about managed objects; the next reconcile per namespace re-lists them
        (so a resync recreates a child someone deleted)."""
        self.applied.clear()
        self.owned.clear()
        self.bundle_maps.clear()
        self.clean_bundles.clear()
        self._primed.clear()

    def agents_using_connector(self, namespace: str, connector: str) -> list[AgentKey]:
        return [
            key
            for key, body in self.agents.items()
            if key[0] == namespace and connector in ((body.get("spec") or {}).get("connectors") or [])
        ]

    def affected_by(self, namespace: str, kind: str, name: str) -> tuple[list[AgentKey], list[AgentKey]]:
        """(Agents, Connectors) that reference the ConfigMap or Secret `name`."""
        connectors = [
            key
            for key, body in self.connectors.items()
            if key[0] == namespace and name in _connector_refs(body, kind)
        ]
        agents: set[AgentKey] = set()
        for key in connectors:
            agents.update(self.agents_using_connector(namespace, key[1]))
        if kind == "Secret":
            for key, body in self.agents.items():
                if key[0] != namespace:
                    continue
                with _ignore_invalid():
                    refs = agent_references(Agent.from_body(body), {})
                    if name in refs.secrets:
                        agents.add(key)
        return sorted(agents), connectors

    async def deployment_changed(self, body: dict[str, Any], *, deleted: bool) -> None:
        meta = body.get("metadata") or {}
        labels = meta.get("labels") or {}
        agent, component = labels.get(AGENT_LABEL), labels.get(COMPONENT_LABEL)
        if not agent or component not in COMPONENTS:
            return
        key = (meta.get("namespace", ""), agent)
        states = self.deployments.setdefault(key, {})
        if deleted:
            states.pop(component, None)
            self.applied.pop((key[0], "apps/v1", "Deployment", meta["name"]), None)
            if key in self.agents:  # deleted behind our back: put it back
                await self.reconcile_agent(key)
            return
        states[component] = DeploymentState.from_body(body)
        self.applied[(key[0], "apps/v1", "Deployment", meta["name"])] = states[component].applied_hash
        if key in self.agents and key in self.outcomes:
            async with self._lock(key):
                await self._write_status(key)
                bundle = self.outcomes[key].bundle
                if bundle is not None and self.clean_bundles.get(key) != bundle["digest"]:
                    await self._collect_bundles(key, keep=set(bundle["configMaps"]), digest=bundle["digest"])

    # --- Agent reconcile ---------------------------------------------------------------------------------

    async def reconcile_agent(self, key: AgentKey) -> None:
        async with self._lock(key):
            body = self.agents.get(key)
            if body is None:
                return
            agent = Agent.from_body(body)
            writes_before = self.api.writes
            try:
                inputs = await self._read_inputs(agent)
                plan = plan_agent(inputs, settings=self.settings.render)
            except InputProblem as problem:
                self.outcomes[key] = Outcome(problem=problem)
                log.warning(
                    "agent input refused",
                    extra={"agent": key[1], "namespace": key[0], "reason": problem.reason},
                )
            else:
                await self._apply(key, plan.objects)
                self.outcomes[key] = Outcome.from_plan(plan)
                await self._collect_bundles(
                    key, keep=set(plan.bundle.config_map_names), digest=plan.bundle.digest
                )
            await self._write_status(key)
            # Concurrent reconciles share the counter: exact only while one Agent reconciles at a time.
            log.info(
                "agent reconciled",
                extra={"agent": key[1], "namespace": key[0], "writes": self.api.writes - writes_before},
            )

    async def _read_inputs(self, agent: Agent) -> AgentInputs:
        ns = agent.meta.namespace
        connectors: dict[str, Connector | None] = {}
        for name in agent.spec.connectors:
            body = await self.api.get(object_path(API_VERSION, "Connector", ns, name))
            connectors[name] = Connector.from_body(body) if body else None
        refs = agent_references(agent, connectors)
        config_maps = {name: await self._read_config_map(ns, name) for name in sorted(refs.config_maps)}
        secret_metas = {name: await self._read_secret_meta(ns, name) for name in sorted(refs.secrets)}
        return AgentInputs(agent=agent, connectors=connectors, config_maps=config_maps, secrets=secret_metas)

    async def _read_watched(self, path: str) -> dict[str, Any] | None:
        """Read a referenced ConfigMap/Secret and label it (once) so the scoped watch sees its changes.

        Labelling happens under a per-object lock with a fresh read, so a concurrent reader sees the
        labelled version: two Agents sharing a Secret must not render different checksums and roll twice.
        The common case (already labelled) takes no lock.
        """
        body = await self.api.get(path)
        if body is None or (body["metadata"].get("labels") or {}).get(WATCHED_LABEL) == "true":
            return body
        async with self._path_locks.setdefault(path, asyncio.Lock()):
            body = await self.api.get(path)
            if body is None:
                return None
            return await self._label(path, body)

    async def _label(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if (body["metadata"].get("labels") or {}).get(WATCHED_LABEL) == "true":
            return body
        patch = {"metadata": {"labels": {WATCHED_LABEL: "true"}}}
        try:
            return await self.api.merge_patch(path, patch, field_manager=f"{FIELD_MANAGER}-watch")
        except ApiError as exc:  # e.g. no patch permission: still usable, just not watched
            log.warning("could not label referenced object", extra={"path": path, "error": exc.message})
            return body

    async def _read_config_map(self, ns: str, name: str) -> dict[str, str] | None:
        body = await self._read_watched(object_path("v1", "ConfigMap", ns, name))
        return None if body is None else dict(body.get("data") or {})

    async def _read_secret_meta(self, ns: str, name: str) -> SecretMeta | None:
        body = await self._read_watched(object_path("v1", "Secret", ns, name))
        if body is None:
            return None
        keys = frozenset((body.get("data") or {}).keys()) | frozenset((body.get("stringData") or {}).keys())
        return SecretMeta(resource_version=body["metadata"].get("resourceVersion", ""), keys=keys)

    async def _prime(self, ns: str) -> None:
        """Learn every object this operator manages in `ns` with one LIST per kind (once per namespace),
        so deciding whether to write needs no per-object read."""
        async with self._prime_locks.setdefault(ns, asyncio.Lock()):
            if ns in self._primed:
                return
            selector = f"app.kubernetes.io/managed-by={MANAGED_BY}"
            for api_version, kind in MANAGED_KINDS:
                for item in await self.api.list(object_path(api_version, kind, ns), label_selector=selector):
                    self._learn(ns, api_version, kind, item)
            self._primed.add(ns)

    def _learn(self, ns: str, api_version: str, kind: str, item: dict[str, Any]) -> None:
        meta = item["metadata"]
        labels = meta.get("labels") or {}
        agent = labels.get(AGENT_LABEL, "")
        role = labels.get(ROLE_LABEL)
        self.owned.setdefault((ns, agent), set()).add((ns, api_version, kind, meta["name"]))
        if role in ("bundle", "runtime-token"):
            self.applied[(ns, api_version, kind, meta["name"])] = "created"
            if role == "bundle":
                self.bundle_maps.setdefault((ns, agent), set()).add(meta["name"])
            return
        self.applied[(ns, api_version, kind, meta["name"])] = (meta.get("annotations") or {}).get(
            APPLIED_HASH, ""
        )
        if kind == "Deployment" and labels.get(COMPONENT_LABEL) in COMPONENTS:
            self.deployments.setdefault((ns, agent), {})[labels[COMPONENT_LABEL]] = DeploymentState.from_body(
                item
            )

    async def _apply(self, key: AgentKey, objects: Sequence[Desired]) -> None:
        """Write only what differs from what the namespace holds (primed by LIST, kept by our writes),
        then delete children no longer rendered (e.g. Memory's after it was disabled)."""
        ns = key[0]
        await self._prime(ns)
        for desired in objects:
            manifest = desired.manifest
            api_version, kind, name = desired.key
            memo_key = (ns, api_version, kind, name)
            want = "created" if desired.create_only else manifest["metadata"]["annotations"][APPLIED_HASH]
            if self.applied.get(memo_key) == want:
                continue
            if desired.create_only:
                body = dict(manifest)
                if desired.generate_token:
                    body["stringData"] = {"token": secrets.token_urlsafe(32)}
                await self.api.create(object_path(api_version, kind, ns), body, field_manager=FIELD_MANAGER)
                self._learn(ns, api_version, kind, manifest)
                continue
            result = await self.api.apply(
                object_path(api_version, kind, ns, name), manifest, field_manager=FIELD_MANAGER
            )
            self._learn(ns, api_version, kind, result)
        wanted = {(ns, *d.key) for d in objects}
        bundles = {(ns, "v1", "ConfigMap", name) for name in self.bundle_maps.get(key, set())}
        for memo_key in sorted(self.owned.get(key, set()) - wanted - bundles):
            _, api_version, kind, name = memo_key
            await self.api.delete(object_path(api_version, kind, ns, name))
            self.applied.pop(memo_key, None)
            self.owned.get(key, set()).discard(memo_key)
            if kind == "Deployment":
                self.deployments.get(key, {}).pop(name.rsplit("-", 1)[-1], None)

    async def _collect_bundles(self, key: AgentKey, *, keep: set[str], digest: str) -> None:
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
            if name not in in_use:
                await self.api.delete(object_path("v1", "ConfigMap", ns, name))
                self.applied.pop((ns, "v1", "ConfigMap", name), None)
                self.bundle_maps.get(key, set()).discard(name)
        if all(name not in in_use for name in stale):
            self.clean_bundles[key] = digest

    async def _deployment_states(self, key: AgentKey) -> dict[str, DeploymentState | None]:
        await self._prime(key[0])  # afterwards the Deployment watch keeps these current
        states = self.deployments.get(key, {})
        return {c: states.get(c) for c in COMPONENTS}

    async def _write_status(self, key: AgentKey) -> None:
        body = self.agents.get(key)
        outcome = self.outcomes.get(key)
        if body is None or outcome is None:
            return
        agent = Agent.from_body(body)
        previous = body.get("status") or {}
        deployments = await self._deployment_states(key)
        status = agent_status(
            generation=agent.meta.generation,
            previous=previous,
            outcome=outcome,
            deployments=deployments,
            memory_enabled=agent.spec.components.memory.enabled,
            now=_now(),
        )
        event = warning_event(previous, outcome.problem)
        if status_changed(previous, status):
            patch = {"status": {**status, **{k: None for k in previous if k not in status}}}
            if "components" in previous:
                patch["status"]["components"] = {
                    **{c: None for c in previous["components"] if c not in status["components"]},
                    **status["components"],
                }
            try:
                result = await self.api.merge_patch(
                    object_path(API_VERSION, "Agent", key[0], key[1], "status"),
                    patch,
                    field_manager=FIELD_MANAGER,
                )
            except ApiError as exc:
                if exc.status == 404:
                    return
                raise
            if key in self.agents:
                self.agents[key] = {**self.agents[key], "status": result.get("status") or {}}
        if event is not None:
            await self.post_event(body, kind="Agent", reason=event[0], message=event[1])

    # --- Connector status --------------------------------------------------------------------------------

    async def reconcile_connector(self, key: AgentKey) -> None:
        async with self._connector_locks.setdefault(key, asyncio.Lock()):
            await self._reconcile_connector(key)

    async def _reconcile_connector(self, key: AgentKey) -> None:
        body = self.connectors.get(key)
        if body is None:
            return
        connector = Connector.from_body(body)
        ref = connector.spec.catalog.config_map_key_ref
        summary = problem = None
        try:
            config_maps = {ref.name: await self._read_config_map(key[0], ref.name)}
            summary = summarize_connector(connector, config_maps)
        except InputProblem as exc:
            problem = exc
        previous = body.get("status") or {}
        status = connector_status(
            generation=connector.meta.generation,
            previous=previous,
            summary=summary,
            problem=problem,
            now=_now(),
        )
        if status_changed(previous, status):
            result = await self.api.merge_patch(
                object_path(API_VERSION, "Connector", key[0], key[1], "status"),
                {"status": status},
                field_manager=FIELD_MANAGER,
            )
            if key in self.connectors:
                self.connectors[key] = {**self.connectors[key], "status": result.get("status") or {}}
        if (event := warning_event(previous, problem)) is not None:
            await self.post_event(body, kind="Connector", reason=event[0], message=event[1])

    async def post_event(self, body: dict[str, Any], *, kind: str, reason: str, message: str) -> None:
        meta = body["metadata"]
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": kind,
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid", ""),
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": MANAGED_BY},
            "reportingComponent": MANAGED_BY,
            "reportingInstance": MANAGED_BY,
            "firstTimestamp": now[:19] + "Z",
            "lastTimestamp": now[:19] + "Z",
            "count": 1,
        }
        try:
            await self.api.create(
                object_path("v1", "Event", meta["namespace"]), event, field_manager=FIELD_MANAGER
            )
        except ApiError as exc:  # an Event is best effort; the condition already says it
            log.warning("could not post event", extra={"reason": reason, "error": exc.message})


def _connector_refs(body: dict[str, Any], kind: str) -> set[str]:
    spec = body.get("spec") or {}
    if kind == "ConfigMap":
        return {((spec.get("catalog") or {}).get("configMapKeyRef") or {}).get("name", "")}
    return {((spec.get("auth") or {}).get("secretKeyRef") or {}).get("name", "")}


class _ignore_invalid:
    """A stored body that no longer validates is skipped in reverse lookups, not fatal."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> bool:
        return exc_type is not None and issubclass(exc_type, ValueError)
