"""The operator's state and its reconcile flows: read inputs (reader), decide (reconcile, pure), apply
(writer), report (status_writer, events).

Bad input applies nothing, so the last good bundle and Deployments stay in service. Any other failure of a
reconcile (a refused write, an API outage, a bug) becomes a condition and a Warning Event on that Agent or
Connector, is logged once with its traceback, and is retried with backoff; it never stops another object's
reconcile. An Agent being deleted gets no writes at all.

API permissions the operator needs (the Helm chart's ClusterRole, or a Role per watched namespace):

- agentengine.io agents, connectors: get, list, watch; agents/status, connectors/status: get, patch,
  update; agents/finalizers: update (blockOwnerDeletion on children)
- configmaps: get, list, watch, create, delete (bundles are created once, immutable; user ConfigMaps are
  only read)
- secrets: get, list, watch, create, update (the token Secret is created once; one its Agent does not own is
  replaced with a fresh token; user Secrets are only read, for their key names; the watch asks for metadata
  only); in the registrations' namespace also patch and delete
- serviceaccounts, services, networkpolicies, deployments: get, list, watch, create, patch, update,
  delete (update replaces a hand-edited child; delete removes children no longer rendered)
- poddisruptionbudgets (policy): get, list, watch, create, patch, update, delete (a component with several
  pods gets one)
- replicasets: list (which bundle ConfigMaps are still mounted); events: create
- kopf.dev clusterkopfpeerings (cluster-wide) or kopfpeerings (namespaced), only with
  AGENT_OPERATOR_PEERING set: get, list, watch, patch
- agentengine.io agents/invoke: create, only with an OE (the chart's oe.enabled): a Connector's
  `Connected` condition comes from the OE's connector-test route, which lets only who may invoke the Agent
  ask (connection.py)

Watches: Agents and Connectors; the metadata (never the data) of every ConfigMap and Secret, so a
referenced one created late is noticed within seconds; the operator's own children (label
`app.kubernetes.io/managed-by=agent-engine-operator`), so a hand edit is reverted when it happens. Secret
values are never read into logs, status, Events or hashes: a referenced Secret rolls its pods through a
checksum of its resourceVersion; only its key names are read. The one exception is spec.notify's Secrets
(a webhook's HMAC key, a slack Connector's token): their values go into the OE's registration only
(publisher.py, notify_targets.py).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import re
import traceback
from dataclasses import replace
from typing import Any

from agent_operator import consent_access
from agent_operator.bundle import BUNDLE, bundle_stem
from agent_operator.compiler import CatalogCompiler
from agent_operator.connection import CONNECTED, ConnectionSettings, connected_event, with_connected
from agent_operator.connection_probe import ConnectionProbe
from agent_operator.discovery import DiscoverySettings, McpDiscovery
from agent_operator.events import EventPoster
from agent_operator.inputs import InputProblem, agent_references
from agent_operator.kube import ApiError, ApiUnreachable, KubeApi, object_path
from agent_operator.later import Later
from agent_operator.models import API_VERSION, Agent, Connector
from agent_operator.publisher import RegistrationPublisher
from agent_operator.reader import ABSENT, InputReader, WatchedVersion
from agent_operator.reconcile import plan_agent, summarize_connector
from agent_operator.render import AGENT_LABEL, ROLE_LABEL, token_secret_name
from agent_operator.settings import OperatorSettings
from agent_operator.shared import SHARED_LABEL
from agent_operator.status import (
    READY,
    Outcome,
    agent_status,
    connector_status,
    rollout_progress_only,
    warning_event,
)
from agent_operator.status_writer import StatusWriter
from agent_operator.watches import Change
from agent_operator.writer import AgentKey, ApplyError, ChildWriter, MemoKey, NameTaken, Superseded

log = logging.getLogger("agent_operator")

# Worth a condition only when they persist: the API server restarting or busy, a write race.
_TRANSIENT_STATUS = frozenset({409, 429, 500, 502, 503, 504})
_TRANSIENT_ATTEMPTS = 3
# A converged Agent's status is written this long after its reconcile or a Deployment change, once for
# all that happened meanwhile: both rollouts finishing close together cost one status write, not three.
STATUS_DELAY_SECONDS = 1.0
# Rollout progress alone (one component available, the other not yet) waits longer: at scale the next
# change (Ready) usually comes first and the one write says both.
PROGRESS_DELAY_SECONDS = 10.0
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def deleting(body: dict[str, Any]) -> bool:
    return bool((body.get("metadata") or {}).get("deletionTimestamp"))


class Operator:
    """What the handlers share: the latest Agent and Connector bodies, outcomes, and the I/O parts."""

    def __init__(
        self, api: KubeApi, settings: OperatorSettings, *, watched_version: WatchedVersion | None = None
    ) -> None:
        self.api = api
        self.settings = settings
        self.compiler = CatalogCompiler(
            seconds=settings.compile_timeout_seconds, memory_bytes=settings.compile_memory_bytes
        )
        self._watched_version = watched_version
        self.reader = InputReader(
            api,
            self.compiler,
            watched_version=watched_version,
            watched_connector=lambda ns, name: self.connectors.get((ns, name)),
        )
        self.writer = ChildWriter(api)
        self.status = StatusWriter(api)
        self.events = EventPoster(api)
        self.registrations = RegistrationPublisher(api, settings.render)
        self.discovery = McpDiscovery(api, DiscoverySettings.from_env(os.environ))
        self.connection = ConnectionProbe(
            oe_url=settings.render.oe_url, settings=ConnectionSettings.from_env(os.environ)
        )
        self._tasks: set[asyncio.Task[bool]] = set()
        self.agents: dict[AgentKey, dict[str, Any]] = {}
        self.connectors: dict[AgentKey, dict[str, Any]] = {}
        self.outcomes: dict[AgentKey, Outcome] = {}
        self.ready: dict[
            AgentKey, bool
        ] = {}  # Ready as last reported, for the Normal Event on becoming Ready
        self.failures: dict[tuple[str, AgentKey], tuple[str, int]] = {}  # last failure, consecutive count
        self._locks: dict[AgentKey, asyncio.Lock] = {}
        self._connector_locks: dict[AgentKey, asyncio.Lock] = {}
        self._collections: Later[str] = Later()  # per namespace
        self._status_writes: Later[AgentKey] = Later()
        self.reconciled: set[AgentKey] = set()  # Agents converged at least once since start (a probe)

    def _lock(self, key: AgentKey) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    async def aclose(self) -> None:
        self._collections.cancel_all()
        self._status_writes.cancel_all()
        for task in list(self._tasks):
            task.cancel()
        self.compiler.close()
        await self.connection.aclose()
        await self.api.aclose()

    # --- what the watches tell -----------------------------------------------------------------------------

    def forget_agent(self, key: AgentKey) -> None:
        for store in (self.agents, self.outcomes, self.ready, self._locks):
            store.pop(key, None)
        self.failures.pop(("agent", key), None)
        self.reconciled.discard(key)
        self.writer.forget_agent(key)
        self.collect_soon(key[0])

    def collect_soon(self, ns: str, *, delay: float = 1.0) -> None:
        """Collect the namespace's unused shared objects shortly (once for a burst of deletions)."""
        if ns in self.writer.pending:
            self._collections.at(ns, delay, lambda: self._collect(ns, delay))

    def collect_everywhere(self) -> None:
        """After a resync: every namespace with a shared object no Agent renders."""
        for ns in list(self.writer.shared_live):
            if self.writer.unused(ns):
                self.writer.pending.add(ns)
                self.collect_soon(ns, delay=0)

    async def _collect(self, ns: str, delay: float) -> None:
        try:
            await self.writer.collect_garbage(ns)
        except Exception as exc:  # tried again below
            self.writer.pending.add(ns)
            log.warning("shared objects not collected", extra={"namespace": ns, "error": _describe(exc)})
        # Still used by pods on their way out (their Deployment's deletion came first): look again later.
        self.collect_soon(ns, delay=min(max(2 * delay, 2.0), 30.0))

    def forget_applied(self) -> None:
        """Drop what was learnt about managed objects; the next reconcile per namespace re-lists them
        (so a resync recreates a child someone deleted and checks every child against its rendering)."""
        self.writer.forget_all()
        self.registrations.forget_all()

    async def withdraw_registration(self, key: AgentKey) -> None:
        """The Agent is gone: the OE must stop taking executions for it (its Secret is not ours to GC)."""
        await self.registrations.withdraw(key)

    async def prune_registrations(self) -> int:
        """Withdraw registrations of Agents deleted while no operator watched."""
        return await self.registrations.prune(set(self.agents))

    def agents_using_connector(self, namespace: str, connector: str) -> list[AgentKey]:
        return [
            key
            for key, body in self.agents.items()
            if key[0] == namespace
            and (
                connector in ((body.get("spec") or {}).get("connectors") or [])
                # spec.notify's slack targets use the Connector's token (issue 34)
                or connector in [t.get("connector") for t in (body.get("spec") or {}).get("notify") or []]
            )
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
        # The Agent's own references: its Secrets, and its spec.knowledge ConfigMaps and Secrets (issue 37).
        if kind in ("Secret", "ConfigMap"):
            for key, body in self.agents.items():
                if key[0] != namespace:
                    continue
                try:
                    refs = agent_references(Agent.from_body(body), {})
                except (
                    ValueError
                ):  # a body that no longer validates is skipped here, reported by its reconcile
                    continue
                if name in (refs.secrets if kind == "Secret" else refs.config_maps):
                    agents.add(key)
        return sorted(agents), connectors

    def _live_agent(self, key: AgentKey) -> bool:
        body = self.agents.get(key)
        return body is not None and not deleting(body)

    def child_changed(
        self, api_version: str, kind: str, body: dict[str, Any], *, deleted: bool, initial: bool = False
    ) -> list[AgentKey]:
        """A watched child changed: the Agents to reconcile (deleted or hand-edited); status refreshed."""
        if initial:  # the watch's first listing: what the namespace holds (each Agent reconciles anyway)
            self.writer.learn(api_version, kind, body)
            return []
        meta = body.get("metadata") or {}
        labels = meta.get("labels") or {}
        ns = meta.get("namespace", "")
        memo: MemoKey = (ns, api_version, kind, meta.get("name", ""))
        if labels.get(SHARED_LABEL) == "true":
            # Put back by one Agent that renders it (its reconcile serves them all).
            users = [k for k in self.writer.users_of(memo) if self._live_agent(k)]
            if deleted:
                self.writer.child_deleted(memo, labels=labels)
                return users[:1]
            return users[:1] if users and self.writer.observe(api_version, kind, body) else []
        key = (ns, labels.get(AGENT_LABEL, ""))
        if kind == "Deployment" and ns in self.writer.pending:
            self.collect_soon(ns)  # a rollout moved on: a superseded bundle may be free now
        if not self._live_agent(key):
            return []  # not ours, or its Agent is going: the garbage collector removes it
        if deleted:
            self.writer.child_deleted(memo, labels=labels)
            return [key]
        if self.writer.observe(api_version, kind, body):
            return [key]
        if kind == "Deployment" and key in self.outcomes:
            self._status_soon(key)
        return []

    def _status_soon(
        self, key: AgentKey, *, delay: float = STATUS_DELAY_SECONDS, force: bool = False
    ) -> None:
        """Write the Agent's status in `delay` (or sooner, when already due sooner)."""
        self._status_writes.at(key, delay, lambda: self._status_later(key, force=force))

    async def _status_later(self, key: AgentKey, *, force: bool) -> None:
        try:
            async with self._lock(key):
                await self._write_status(key, defer_progress=not force)
        except ApiError as exc:  # the next Deployment event or resync refreshes it
            log.warning("status refresh failed", extra={"error": str(exc)[:300]})

    async def referenced_changed(self, change: Change) -> tuple[list[AgentKey], list[AgentKey]]:
        """A ConfigMap or Secret changed (metadata watch): the (Agents, Connectors) to reconcile."""
        ns, name = change.namespace, change.name
        if change.kind == "ConfigMap" and bundle_stem(name) is not None:
            # A bundle ConfigMap (or one posing as it): deleted, replaced, or ours.
            users = await self.writer.bundle_changed(
                ns, name, resource_version=change.resource_version, deleted=change.deleted
            )
            return [k for k in users if self._live_agent(k)], []
        labels = change.labels
        if change.kind == "Secret" and ns == self.settings.render.registration_namespace:
            # A registration changed or deleted by someone else: republished now, not at the next resync.
            key = self.registrations.registration_changed(
                name, change.resource_version, deleted=change.deleted
            )
            if key is not None and self._live_agent(key):
                log.warning(
                    "registration changed outside the operator; republishing",
                    extra={"agent": key[1], "namespace": key[0], "deleted": change.deleted},
                )
                return [key], []
        if change.deleted and name.endswith("-runtime-token"):
            # Ours (by its labels), or one that held our name (a foreign token Secret deleted): create ours.
            key = (ns, name.removesuffix("-runtime-token"))
            if self._live_agent(key):
                self.writer.child_deleted((ns, "v1", "Secret", name), labels=labels)
                return [key], []
        if labels.get(ROLE_LABEL) == "runtime-token" and not change.deleted:
            key = (ns, labels.get(AGENT_LABEL, ""))
            # A rotated token (the Secret edited): republish the registration now, while the Agent's pods
            # still accept the previous token (the runtime's grace period), not at the next resync.
            if self._live_agent(key) and self.registrations.token_changed(key, change.resource_version or ""):
                return [key], []
        if not self.reader.stale(change.kind, ns, name, change.resource_version or ABSENT):
            return [], []
        return self.affected_by(ns, change.kind, name)

    # --- Agents --------------------------------------------------------------------------------------------

    async def repair_agent(self, key: AgentKey) -> bool:
        """A reconcile after one of the Agent's objects was deleted: the Agent as the API server has it now
        decides first. A Foreground deletion removes the children while the Agent's own event (its
        deletionTimestamp) may still be on its way, and nothing may be put back then."""
        try:
            live = await self.api.get(object_path(API_VERSION, "Agent", *key))
        except ApiError:
            live = self.agents.get(key)  # cannot tell now: the reconcile decides (and retries)
        known = self.agents.get(key)
        if live is None or deleting(live):
            if known is not None:
                stamp = (live or {}).get("metadata", {}).get("deletionTimestamp") or _now()
                self.agents[key] = {**known, "metadata": {**known["metadata"], "deletionTimestamp": stamp}}
            return True
        return await self.reconcile_agent(key)

    async def reconcile_agent(self, key: AgentKey) -> bool:
        """Converge one Agent. Never raises (but for cancellation): False asks for a retry later."""
        async with self._lock(key):
            body = self.agents.get(key)
            if body is None or deleting(body):
                return True  # an Agent being deleted gets no writes: the garbage collector does the rest
            writes_before = self.api.writes
            try:
                settled = await self._reconcile_agent(key, body)
            except Superseded:
                return True
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self._report_failure("agent", key, exc)
                return False
            self.failures.pop(("agent", key), None)
            if not settled:
                return False  # said in a condition; tried again with backoff (the name may come free)
            self.reconciled.add(key)
            # Concurrent reconciles share the counter: exact only while one Agent reconciles at a time.
            log.info(
                "agent reconciled",
                extra={"agent": key[1], "namespace": key[0], "writes": self.api.writes - writes_before},
            )
            return True

    async def _reconcile_agent(self, key: AgentKey, body: dict[str, Any]) -> bool:
        """False when a child's name is held by an object the operator may not take (a condition says so):
        nothing watched tells when it comes free, so the reconcile is retried."""
        agent = Agent.from_body(body)
        settled = True
        uid = agent.meta.uid

        def current() -> bool:
            live = self.agents.get(key)
            return live is not None and not deleting(live) and live["metadata"].get("uid", "") == uid

        try:
            inputs = await self.reader.agent_inputs(agent)
            # Before the plan: an Agent whose MCP connector waits for a person's consent has no tools to
            # plan with yet, and the console consent needs this to give them (consent_access.py).
            await consent_access.converge(
                self.api, agent, inputs.connectors, secret_meta=self.reader.secret_meta,
                settings=self.settings.render,
            )  # fmt: skip
            plan = plan_agent(inputs, settings=self.settings.render)
        except InputProblem as problem:
            self.outcomes[key] = Outcome(problem=problem)
            log.warning(
                "agent input refused", extra={"agent": key[1], "namespace": key[0], "reason": problem.reason}
            )
        else:
            try:
                repairs = await self.writer.apply(key, plan.objects, current=current)
            except NameTaken as taken:
                self.outcomes[key] = Outcome(problem=InputProblem(reason=taken.reason, message=taken.message))
                log.warning(
                    "agent child name taken",
                    extra={"agent": key[1], "namespace": key[0], "reason": taken.reason},
                )
                settled = False
                repairs = None
            if repairs is not None:
                self.collect_soon(key[0])  # when this rendering dropped a shared object (a new bundle)
                # After the children: the runtime token the registration carries exists by now.
                registration = await self.registrations.publish(agent, known_token=self._known_token(key))
                self.outcomes[key] = replace(Outcome.from_plan(plan), registration=registration or "")
                for repair in repairs:
                    log.warning(
                        "child repaired",
                        extra={"agent": key[1], "namespace": key[0], "object": f"{repair.kind}/{repair.name}",
                               "paths": list(repair.paths[:10]), "reason": repair.reason},
                    )  # fmt: skip
                    await self.events.post(
                        body,
                        kind="Agent",
                        reason=repair.reason,
                        message=repair.describe(),
                        type_=repair.type_,
                    )
        if not current():
            return True
        if self.outcomes[key].problem is None:
            self._status_soon(key)
        else:  # bad input: say so at once
            await self._write_status(key)
        return settled

    def _known_token(self, key: AgentKey) -> tuple[str, str] | None:
        """The token as created or listed, unless the metadata watch has seen its Secret change since."""
        known = self.writer.tokens.get(key)
        if known is None or self._watched_version is None:
            return known
        watched = self._watched_version("Secret", key[0], token_secret_name(key[1]))
        return known if watched in (None, ABSENT, known[0]) else None

    async def _write_status(self, key: AgentKey, *, defer_progress: bool = False) -> None:
        body = self.agents.get(key)
        outcome = self.outcomes.get(key)
        if body is None or outcome is None or deleting(body):
            return
        agent = Agent.from_body(body)
        previous = body.get("status") or {}
        status = agent_status(
            generation=agent.meta.generation,
            previous=previous,
            outcome=outcome,
            deployments=await self.writer.deployment_states(key),
            memory_enabled=agent.spec.components.memory.enabled,
            now=_now(),
        )
        if defer_progress and rollout_progress_only(previous, status):
            self._status_soon(key, delay=PROGRESS_DELAY_SECONDS, force=True)
            return
        stored = await self.status.write("Agent", *key, previous=previous, status=status)
        if stored is not None and key in self.agents:
            self.agents[key] = {**self.agents[key], "status": stored}
            if outcome.registration == "":
                # The registration carries the Agent's conditions and bundle digest (the console shows
                # them): republished with the status just written; unchanged content writes nothing.
                await self.registrations.publish(
                    Agent.from_body(self.agents[key]), known_token=self._known_token(key)
                )
        if (event := warning_event(previous, outcome.problem)) is not None:
            await self.events.post(body, kind="Agent", reason=event[0], message=event[1])
        ready = next((c for c in status["conditions"] if c["type"] == READY), {})
        is_ready = ready.get("status") == "True"
        was_ready = self.ready.get(key, _condition(previous, READY).get("status") == "True")
        self.ready[key] = is_ready
        if is_ready and not was_ready:
            await self.events.post(body, kind="Agent", reason=READY, message=ready["message"], type_="Normal")
            self._test_connectors_of(key, body)

    def _test_connectors_of(self, key: AgentKey, body: dict[str, Any]) -> None:
        """An Agent became Ready: its Connectors not yet Connected are tested now, in their Tool Pod (in
        tasks of their own: a test waits on the OE, and this Agent's lock is held)."""
        if not self.connection.settings.token_file:
            return  # nothing can be tested: the Connectors say NotConfigured already
        for name in (body.get("spec") or {}).get("connectors") or []:
            connector = (key[0], name)
            found = self.connectors.get(connector)
            if found is None or _condition(found.get("status") or {}, CONNECTED).get("status") == "True":
                continue
            self.connection.ask(connector)
            task = asyncio.create_task(self.reconcile_connector(connector))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # --- Connectors ----------------------------------------------------------------------------------------

    async def reconcile_connector(self, key: AgentKey) -> bool:
        """The Connector's own status (does it compile, how many tools). Never raises but for cancellation."""
        async with self._connector_locks.setdefault(key, asyncio.Lock()):
            body = self.connectors.get(key)
            if body is None:
                return True
            try:
                await self._reconcile_connector(key, body)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self._report_failure("connector", key, exc)
                return False
            self.failures.pop(("connector", key), None)
            return True

    async def _reconcile_connector(
        self, key: AgentKey, body: dict[str, Any], *, problem: InputProblem | None = None
    ) -> None:
        connector = Connector.from_body(body)
        # An `mcp` Connector's tools: discovered now when due, else the last discovery (discovery.py).
        mcp = await self.discovery.refresh(key, body, attempt=problem is None)
        if mcp is not None:
            connector = mcp.connector
        summary = None
        if problem is None:
            try:
                inputs = await self.reader.connector_inputs(connector)
                summary = summarize_connector(
                    connector,
                    inputs.config_maps,
                    inputs.catalogs,
                    allow_metadata_addresses=self.settings.render.allow_metadata_addresses,
                )
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
        if mcp is not None:
            status = mcp.status(status, previous=previous, generation=connector.meta.generation, now=_now())
        # Its connection, tested in the Tool Pod of an Agent that uses it (only when due; a Connector that
        # does not compile is in no bundle, so it keeps what its last test said).
        connected = (
            await self.connection.condition(key, body, agents=self.agents) if problem is None else None
        )
        status = with_connected(
            status, previous=previous, connected=connected, generation=connector.meta.generation, now=_now()
        )
        stored = await self.status.write("Connector", *key, previous=previous, status=status)
        if stored is not None and key in self.connectors:
            self.connectors[key] = {**self.connectors[key], "status": stored}
        if (event := warning_event(previous, problem)) is not None:
            await self.events.post(body, kind="Connector", reason=event[0], message=event[1])
        if connected is not None and (event := connected_event(previous, connected)) is not None:
            await self.events.post(body, kind="Connector", reason=event[0], message=event[1], type_=event[2])

    # --- failures ------------------------------------------------------------------------------------------

    async def _report_failure(self, what: str, key: AgentKey, exc: Exception) -> None:
        """Log once with the traceback (then briefly), and say it on the object: a condition and an Event
        (for a transient API error only once it persists)."""
        detail = _describe(exc)
        previous, count = self.failures.get((what, key), ("", 0))
        count += 1
        self.failures[(what, key)] = (detail, count)
        extra = {"kind": what, "namespace": key[0], "object": key[1], "error": detail, "attempt": count}
        if detail != previous:  # the traceback once per new failure, with URL credentials masked
            trace = "".join(traceback.format_exception(exc))
            log.error("reconcile failed; retrying with backoff", extra={**extra, "traceback": _scrub(trace)})
        else:
            log.warning("reconcile failed again; retrying with backoff", extra=extra)
        if _transient(exc) and count < _TRANSIENT_ATTEMPTS:
            return
        if isinstance(exc, ApplyError) and not isinstance(exc.error, ApiUnreachable):
            problem = InputProblem(
                reason="ApplyFailed",
                message=f"{detail}; fix the cause (RBAC, a quota, an admission policy); the operator retries "
                "with backoff",
            )
        else:
            problem = InputProblem(
                reason="ReconcileFailed",
                message=f"the operator could not reconcile this {what} ({detail}); it retries with backoff, "
                "and its log has the details",
                condition=BUNDLE if what == "connector" else READY,
            )
        try:
            if what == "agent":
                if self._live_agent(key):
                    self.outcomes[key] = Outcome(problem=problem)
                    await self._write_status(key)
            elif (body := self.connectors.get(key)) is not None:
                await self._reconcile_connector(key, body, problem=problem)
        except ApiError as report_error:  # the API itself is failing: the log must do
            log.warning(
                "could not report the failure", extra={**extra, "report_error": str(report_error)[:300]}
            )


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def _transient(exc: Exception) -> bool:
    error = exc.error if isinstance(exc, ApplyError) else exc
    return isinstance(error, ApiUnreachable) or (
        isinstance(error, ApiError) and error.status in _TRANSIENT_STATUS
    )


def _describe(exc: Exception) -> str:
    """One line for a condition: the API server's Status message, or the exception's first line, without
    any credentials a URL may carry."""
    if isinstance(exc, ApplyError):
        text = str(exc)
    else:
        lines = str(exc).strip().splitlines()
        text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return _scrub(text)[:500]


def _scrub(text: str) -> str:
    return _URL_CREDENTIALS.sub("***@", text)


def _connector_refs(body: dict[str, Any], kind: str) -> set[str]:
    spec = body.get("spec") or {}
    tls = spec.get("tls") or {}
    if kind == "ConfigMap":
        return {
            ((spec.get("catalog") or {}).get("configMapKeyRef") or {}).get("name", ""),
            (tls.get("caConfigMapKeyRef") or {}).get("name", ""),
        }
    return {
        ((spec.get("auth") or {}).get("secretKeyRef") or {}).get("name", ""),
        (tls.get("caSecretKeyRef") or {}).get("name", ""),
    }
