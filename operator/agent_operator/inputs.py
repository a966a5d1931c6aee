"""What one Agent's reconcile reads, which objects an Agent references, and how bad input is reported."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from agent_operator.models import Agent, Connector, SecretKeyRef
from agent_operator.notify_targets import notify_connectors, notify_secret_refs
from agent_runtime.connectors import ToolDefinitions


class InputProblem(Exception):
    """Bad input: becomes a False condition (on `condition`) and a Warning Event; nothing is applied."""

    def __init__(self, *, reason: str, message: str, condition: str = "Ready") -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.condition = condition


@dataclass(frozen=True)
class SecretMeta:
    """A referenced Secret as rendering sees it: never its values, only its keys and version."""

    resource_version: str
    keys: frozenset[str]


@dataclass(frozen=True)
class CatalogFailure:
    """A catalog the compiler refused (`reason` is the condition's, `detail` says why, naming no value)."""

    reason: str
    detail: str


CatalogKey = tuple[str, str]  # connector name, sha256 of the catalog text
Catalogs = Mapping[CatalogKey, "ToolDefinitions | CatalogFailure"]


def catalog_key(connector_name: str, text: str) -> CatalogKey:
    """What a compiled catalog depends on: the connector's name (its tools' prefix) and the text."""
    return (connector_name, hashlib.sha256(text.encode()).hexdigest())


@dataclass(frozen=True)
class AgentInputs:
    """Everything the pure reconcile needs; a missing object maps to None.

    `catalogs` holds catalogs compiled ahead (off the event loop, with limits); one not there is compiled
    inline, as unit tests do."""

    agent: Agent
    connectors: Mapping[str, Connector | None] = field(default_factory=dict)
    config_maps: Mapping[str, Mapping[str, str] | None] = field(default_factory=dict)
    secrets: Mapping[str, SecretMeta | None] = field(default_factory=dict)
    catalogs: Catalogs = field(default_factory=dict)


@dataclass(frozen=True)
class References:
    connectors: frozenset[str] = frozenset()
    config_maps: frozenset[str] = frozenset()
    secrets: frozenset[str] = frozenset()


def connector_ca_env(connector_name: str) -> str:
    """The Tool Pod variable a Connector's spec.tls CA (PEM text) arrives under, and its tool.yaml's
    `tls.ca_env`: TLS_CA_<NAME>, the name upper-cased with '-' as '_' (never a platform prefix)."""
    return "TLS_CA_" + connector_name.upper().replace("-", "_")


def component_secret_refs(
    agent: Agent, connectors: Mapping[str, Connector | None]
) -> dict[str, list[tuple[str, SecretKeyRef]]]:
    """(env name, Secret key) per component, routed by the trust table: LLM keys and connector
    credentials to the Tool Pod only (model calls run there, Decision 9), database credentials to Memory
    only; the AER gets only what its own secretEnv names."""
    spec = agent.spec
    aer = [(c.name, c.secret_key_ref) for c in spec.components.aer.secret_env]
    tool: list[tuple[str, SecretKeyRef]] = [(c.name, c.secret_key_ref) for c in spec.llm.credentials]
    for name in spec.connectors:
        connector = connectors.get(name)
        auth = connector.spec.auth if connector else None
        if auth and auth.env and auth.secret_key_ref:
            tool.append((auth.env, auth.secret_key_ref))
        if connector is not None:
            tool += [(c.env, c.secret_key_ref) for c in connector.spec.credentials]
            tls = connector.spec.tls
            if tls is not None and tls.ca_secret_key_ref is not None:
                tool.append((connector_ca_env(name), tls.ca_secret_key_ref))
    tool += [(c.name, c.secret_key_ref) for c in spec.components.tool.secret_env]
    memory: list[tuple[str, SecretKeyRef]] = []
    if spec.components.memory.enabled:
        store = spec.components.memory.store
        if store.type == "mongodb" and store.uri_secret_ref:
            memory.append(("MEMORY_MONGODB_URI", store.uri_secret_ref))
        memory += [(c.name, c.secret_key_ref) for c in spec.components.memory.secret_env]
    return {"aer": aer, "tool": tool, "memory": memory}


def agent_references(agent: Agent, connectors: Mapping[str, Connector | None]) -> References:
    """The Connectors, ConfigMaps and Secrets whose change must re-render this Agent."""
    config_maps = {
        c.spec.catalog.config_map_key_ref.name
        for name in agent.spec.connectors
        if (c := connectors.get(name)) is not None and c.spec.catalog is not None
    }
    config_maps |= {
        c.spec.tls.ca_config_map_key_ref.name
        for name in agent.spec.connectors
        if (c := connectors.get(name)) is not None
        and c.spec.tls is not None
        and c.spec.tls.ca_config_map_key_ref is not None
    }
    secrets = {ref.name for refs in component_secret_refs(agent, connectors).values() for _, ref in refs}
    secrets |= {ref.name for _, ref in notify_secret_refs(agent, connectors)}  # spec.notify (issue 34)
    # spec.knowledge (issue 37): read so that a missing one is named, not left to a pod in ContainerCreating.
    config_maps |= {e.config_map_name for e in agent.spec.knowledge if e.config_map_name}
    secrets |= {e.secret_name for e in agent.spec.knowledge if e.secret_name}
    return References(
        connectors=frozenset(agent.spec.connectors) | frozenset(notify_connectors(agent)),
        config_maps=frozenset(config_maps),
        secrets=frozenset(secrets),
    )
