"""Publishing each Agent's registration for the Orchestration Engine (Decision 12), and taking it back.

The registration Secret lives in the OE's namespace, so the Agent cannot own it and the garbage collector
never removes it: the operator withdraws it when the Agent is deleted, and a resync prunes any whose
Agent is gone (one deleted while no operator ran). It is written only when its content changes.

What is in place is learnt with one LIST of the OE namespace's registrations (again after a resync), and the
runtime token from what the operator itself created or listed, so a restart with a thousand Agents reads
nothing per Agent; a token Secret that changed since (a rotation) is read again.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
from typing import Any

from agent_operator.kube import ApiError, ApiUnreachable, KubeApi, object_path
from agent_operator.models import API_VERSION, Agent, Connector
from agent_operator.notify_targets import (
    notify_connectors,
    notify_document,
    notify_secret_refs,
    notify_targets,
)
from agent_operator.registration import AGENT_NAMESPACE_LABEL, registration_secret_name, render_registration
from agent_operator.render import AGENT_LABEL, token_secret_name
from agent_operator.settings import FIELD_MANAGER, RenderSettings
from agent_runtime.oe.registration import REGISTRATION_LABEL

log = logging.getLogger(__name__)

AgentKey = tuple[str, str]
KnownToken = tuple[str, str]  # the token Secret's resourceVersion, the token
_WRITING = "writing"  # the resourceVersion of a registration while our write of it is on its way


class RegistrationPublisher:
    def __init__(self, api: KubeApi, settings: RenderSettings) -> None:
        self._api = api
        self._settings = settings
        # What we last wrote (content digest) and why it failed, if it did.
        self._published: dict[AgentKey, tuple[str, str | None]] = {}
        # The resourceVersion of each Agent's token Secret as last read: an edit (a rotation) republishes.
        self._token_versions: dict[AgentKey, str] = {}
        # Registrations in place (name -> data and labels) from one LIST; None: not listed (or refused).
        self._live: dict[str, dict[str, Any]] | None = None
        self._list_lock = asyncio.Lock()
        # Each registration's Agent and the resourceVersion it has as we wrote or listed it: a watch event
        # with another one is someone else's edit (or deletion), repaired at once (registration_changed).
        self._agents: dict[str, AgentKey] = {}
        self._versions: dict[str, str] = {}

    def registration_changed(self, name: str, resource_version: str, *, deleted: bool) -> AgentKey | None:
        """A Secret in the registrations' namespace changed: the Agent whose registration it is, when the
        change is not our own write (its next publish writes it again); else None."""
        key = self._agents.get(name)
        if key is None or (not deleted and self._versions.get(name) in (resource_version, _WRITING)):
            return None  # not a registration of ours, or our own write (its answer may come after the event)
        self._published.pop(key, None)
        self._versions.pop(name, None)
        if self._live is not None:
            self._live.pop(name, None)  # absent as far as publish knows: written again
        return key

    def token_changed(self, key: AgentKey, resource_version: str) -> bool:
        """Whether the Agent's token Secret changed since its registration was last published."""
        known = self._token_versions.get(key)
        return known is not None and known != resource_version

    def forget_all(self) -> None:
        """Forget what was written (a resync re-checks every registration against the server)."""
        self._published.clear()
        self._live = None
        self._versions.clear()

    async def publish(self, agent: Agent, *, known_token: KnownToken | None = None) -> str | None:
        """Write the Agent's registration; None when it is in place, else why it is not (for a condition).
        `known_token`: the token Secret as the operator created or listed it, when nothing says it changed.

        Read before writing: a resync (which forgets what was written) finds it in place and writes nothing.
        """
        key = (agent.meta.namespace, agent.meta.name)
        token = await self._token(agent, known_token)
        if token is None:
            return f"the runtime token Secret {token_secret_name(agent.meta.name)} has no token yet"
        try:
            notify = await self._notify(agent)
        except LookupError as missing:  # gone since the reconcile checked it: the next reconcile says which
            return f"spec.notify: {missing.args[0]} is not readable yet"
        manifest = render_registration(agent, token=token, settings=self._settings, notify=notify)
        digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()
        known = self._published.get(key)
        if known is not None and known[0] == digest:
            return known[1]
        name = manifest["metadata"]["name"]
        path = object_path("v1", "Secret", self._settings.registration_namespace, name)
        problem: str | None = None
        self._agents[name] = key
        try:
            live = await self._in_place(path, name)
            if (
                live is None
                or (live.get("data") or {}) != manifest["data"]
                or _labels(live) != _labels(manifest)
            ):
                self._versions[name] = _WRITING
                try:
                    written = await self._api.apply(path, manifest, field_manager=FIELD_MANAGER)
                except BaseException:
                    self._versions.pop(name, None)
                    raise
                self._versions[name] = _version(written)
                if self._live is not None:
                    self._live[name] = _compared(manifest)
                log.info("registration published", extra={"agent": key[1], "namespace": key[0]})
            elif name not in self._versions and (version := _version(live)):
                self._versions[name] = version
        except ApiUnreachable:
            raise  # an outage: the reconcile is retried, nothing is remembered
        except ApiError as exc:
            # The OE's namespace may not exist yet, or RBAC may not allow it: say so, never the token.
            where = self._settings.registration_namespace
            problem = f"cannot write the registration in namespace {where}: HTTP {exc.status}"
        # A failure is remembered too, so a refused write is retried by the next resync, not every event.
        self._published[key] = (digest, problem)
        return problem

    async def _in_place(self, path: str, name: str) -> dict[str, Any] | None:
        """The registration as it stands: from the namespace's one LIST, or a GET when it cannot be listed."""
        async with self._list_lock:
            if self._live is None:
                collection = object_path("v1", "Secret", self._settings.registration_namespace)
                try:
                    items = await self._api.list(collection, label_selector=f"{REGISTRATION_LABEL}=true")
                except ApiError:
                    items = None
                if items is not None:  # only what is compared: a thousand whole Secrets are megabytes
                    self._live = {item["metadata"]["name"]: _compared(item) for item in items}
                    for item in items:
                        self._versions[item["metadata"]["name"]] = _version(item)
        if self._live is not None:
            return self._live.get(name)
        return await self._api.get(path)

    async def withdraw(self, key: AgentKey) -> None:
        """Delete the Agent's registration if it exists (gone already is fine)."""
        known = self._published.pop(key, None)
        self._token_versions.pop(key, None)
        name = registration_secret_name(*key)
        self._agents.pop(name, None)
        self._versions.pop(name, None)
        if self._live is not None:
            self._live.pop(name, None)
        path = object_path("v1", "Secret", self._settings.registration_namespace, name)
        if known is not None and known[1] is not None:
            return  # never written
        if known is None and await self._api.get(path) is None:
            return  # not known to this process (a restart): read before writing
        if await self._api.delete(path):
            log.info("registration withdrawn", extra={"agent": key[1], "namespace": key[0]})

    async def prune(self, live: set[AgentKey]) -> int:
        """Withdraw registrations whose Agent this operator no longer knows; returns how many."""
        path = object_path("v1", "Secret", self._settings.registration_namespace)
        items = await self._api.list(path, label_selector=f"{REGISTRATION_LABEL}=true")
        pruned = 0
        for item in items:
            labels = (item.get("metadata") or {}).get("labels") or {}
            key = (labels.get(AGENT_NAMESPACE_LABEL, ""), labels.get(AGENT_LABEL, ""))
            if all(key) and key not in live:
                await self.withdraw(key)
                pruned += 1
        return pruned

    async def _notify(self, agent: Agent) -> list[dict[str, str]]:
        """spec.notify with its Secret values read (a few GETs, only for an Agent that has targets)."""
        if not agent.spec.notify:
            return []
        ns = agent.meta.namespace
        connectors: dict[str, Connector | None] = {}
        for name in notify_connectors(agent):
            body = await self._api.get(object_path(API_VERSION, "Connector", ns, name))
            connectors[name] = Connector.from_body(body) if body else None
        values: dict[tuple[str, str], str] = {}
        for _, ref in notify_secret_refs(agent, connectors):
            secret = await self._api.get(object_path("v1", "Secret", ns, ref.name))
            encoded = ((secret or {}).get("data") or {}).get(ref.key)
            if encoded is None:
                raise LookupError(f"Secret {ref.name} key {ref.key}")
            values[(ref.name, ref.key)] = base64.b64decode(encoded).decode()
        try:
            return notify_document(notify_targets(agent, connectors, values))
        except KeyError as missing:
            raise LookupError(str(missing.args[0])) from None

    async def _token(self, agent: Agent, known: KnownToken | None) -> str | None:
        if known is not None:
            self._token_versions[(agent.meta.namespace, agent.meta.name)] = known[0]
            return known[1]
        secret: dict[str, Any] | None = await self._api.get(
            object_path("v1", "Secret", agent.meta.namespace, token_secret_name(agent.meta.name))
        )
        version = ((secret or {}).get("metadata") or {}).get("resourceVersion")
        if version:
            self._token_versions[(agent.meta.namespace, agent.meta.name)] = str(version)
        encoded = ((secret or {}).get("data") or {}).get("token")
        return base64.b64decode(encoded).decode() if encoded else None


def _compared(obj: dict[str, Any]) -> dict[str, Any]:
    """What `publish` compares of a registration: its data and labels."""
    return {"data": obj.get("data") or {}, "metadata": {"labels": _labels(obj)}}


def _version(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion", ""))


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})
