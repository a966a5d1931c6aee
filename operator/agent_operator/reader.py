"""Reading what one reconcile needs: an Agent's Connectors, the ConfigMaps and Secrets they reference, and
their catalogs compiled (off the event loop, see compiler.py).

Secrets are read for their key names and resourceVersion only; no value leaves this module. Every
referenced object's resourceVersion as last read (or its absence) is remembered, so a metadata watch event
can tell whether it changes anything.

Reads are served from what the watches already hold when they can be: a Connector from the Connector watch,
a ConfigMap's data or a Secret's key names from the last GET while the metadata watch still reports that
same resourceVersion. So a thousand Agents using one Connector cost one GET of each, not a thousand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from agent_operator.compiler import CatalogCompiler
from agent_operator.inputs import AgentInputs, CatalogKey, SecretMeta, agent_references, catalog_key
from agent_operator.kube import KubeApi, object_path
from agent_operator.models import API_VERSION, Agent, Connector
from agent_operator.notify_targets import notify_connectors
from agent_runtime.connectors import ToolDefinitions

ObjectKey = tuple[str, str, str]  # kind, namespace, name
ABSENT = ""  # the resourceVersion remembered for an object that did not exist
# The resourceVersion a watch holds for (kind, namespace, name): ABSENT when it knows there is none, None
# when no watch knows (not listed yet, or a kind nobody watches).
WatchedVersion = Callable[[str, str, str], str | None]
# A Connector's body as the Connector watch last delivered it, or None.
WatchedConnector = Callable[[str, str], dict[str, Any] | None]
T = TypeVar("T")


@dataclass(frozen=True)
class ConnectorInputs:
    config_maps: dict[str, dict[str, str] | None]
    catalogs: dict[CatalogKey, Any]


class InputReader:
    def __init__(
        self,
        api: KubeApi,
        compiler: CatalogCompiler,
        *,
        watched_version: WatchedVersion | None = None,
        watched_connector: WatchedConnector | None = None,
    ) -> None:
        self.api = api
        self.compiler = compiler
        self.versions: dict[ObjectKey, str] = {}
        self._watched_version = watched_version
        self._watched_connector = watched_connector
        self._values: dict[ObjectKey, tuple[str, Any]] = {}  # last read: (resourceVersion, value)

    def stale(self, kind: str, namespace: str, name: str, resource_version: str) -> bool:
        """Whether an object some reconcile read (or found missing) now has another resourceVersion
        (ABSENT when deleted). One never read is referenced by nothing: every reconcile reads all it
        references, so the watch's events about other objects cost nothing."""
        known = self.versions.get((kind, namespace, name))
        return known is not None and known != resource_version

    def forget(self) -> None:
        self.versions.clear()
        self._values.clear()

    async def agent_inputs(self, agent: Agent) -> AgentInputs:
        ns = agent.meta.namespace
        # spec.notify's slack Connectors too (their token credential), not only those whose tools it calls.
        wanted = dict.fromkeys((*agent.spec.connectors, *notify_connectors(agent)))
        connectors = {name: await self.connector(ns, name) for name in wanted}
        refs = agent_references(agent, connectors)
        config_maps = {name: await self.config_map(ns, name) for name in sorted(refs.config_maps)}
        secrets = {name: await self.secret_meta(ns, name) for name in sorted(refs.secrets)}
        catalogs: dict[CatalogKey, Any] = {}
        for connector in connectors.values():
            if connector is not None:
                catalogs.update(await self._compile(connector, config_maps))
        return AgentInputs(
            agent=agent, connectors=connectors, config_maps=config_maps, secrets=secrets, catalogs=catalogs
        )

    async def connector_inputs(self, connector: Connector) -> ConnectorInputs:
        if connector.spec.catalog is None:  # a built-in type: its config is in the spec
            return ConnectorInputs(config_maps={}, catalogs={})
        ref = connector.spec.catalog.config_map_key_ref
        config_maps = {ref.name: await self.config_map(connector.meta.namespace, ref.name)}
        tls = connector.spec.tls
        if (
            tls is not None
            and tls.ca_config_map_key_ref is not None
            and tls.ca_config_map_key_ref.name not in config_maps
        ):
            ca = tls.ca_config_map_key_ref.name
            config_maps[ca] = await self.config_map(connector.meta.namespace, ca)
        return ConnectorInputs(config_maps=config_maps, catalogs=await self._compile(connector, config_maps))

    async def _compile(
        self, connector: Connector, config_maps: dict[str, dict[str, str] | None]
    ) -> dict[CatalogKey, ToolDefinitions | Any]:
        if connector.spec.catalog is None:
            return {}
        ref = connector.spec.catalog.config_map_key_ref
        text = (config_maps.get(ref.name) or {}).get(ref.key)
        if text is None:
            return {}  # the pure reconcile reports the missing ConfigMap or key
        name = connector.meta.name
        return {catalog_key(name, text): await self.compiler.compile(text, connector_name=name)}

    async def connector(self, ns: str, name: str) -> Connector | None:
        """From the Connector watch when it has it (parsed once per resourceVersion), else a GET."""
        body = self._watched_connector(ns, name) if self._watched_connector else None
        if body is None:
            body = await self.api.get(object_path(API_VERSION, "Connector", ns, name))
            return Connector.from_body(body) if body else None
        version = (body.get("metadata") or {}).get("resourceVersion", "")
        key = ("Connector", ns, name)
        cached = self._values.get(key)
        if cached is not None and cached[0] == version and version:
            return cached[1]
        connector = Connector.from_body(body)
        self._values[key] = (version, connector)
        return connector

    async def config_map(self, ns: str, name: str) -> dict[str, str] | None:
        return await self._read("ConfigMap", ns, name, lambda body: dict(body.get("data") or {}))

    async def secret_meta(self, ns: str, name: str) -> SecretMeta | None:
        return await self._read("Secret", ns, name, _secret_meta)

    async def _read(self, kind: str, ns: str, name: str, convert: Callable[[dict[str, Any]], T]) -> T | None:
        """The object's value as last read while the metadata watch reports the same resourceVersion;
        otherwise a GET (remembered for the next reader)."""
        key = (kind, ns, name)
        cached = self._values.get(key)
        watched = self._watched_version(kind, ns, name) if self._watched_version else None
        if cached is not None and watched == cached[0]:
            self.versions[key] = cached[0]
            return cached[1]
        body = await self.api.get(object_path("v1", kind, ns, name))
        version = _version(body)
        value = None if body is None else convert(body)
        self.versions[key] = version
        self._values[key] = (version, value)
        return value


def _secret_meta(body: dict[str, Any]) -> SecretMeta:
    keys = frozenset((body.get("data") or {}).keys()) | frozenset((body.get("stringData") or {}).keys())
    return SecretMeta(resource_version=body["metadata"].get("resourceVersion", ""), keys=keys)


def _version(body: dict[str, Any] | None) -> str:
    return ABSENT if body is None else body["metadata"].get("resourceVersion", "")
