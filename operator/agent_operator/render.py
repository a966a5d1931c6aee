"""Kubernetes manifests for one Agent (pure): its own children (Deployments, Services, the runtime token
Secret, Memory's NetworkPolicy) and the objects it shares with the namespace's other Agents (shared.py:
ServiceAccounts, NetworkPolicies, bundle ConfigMaps)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from agent_operator.bundle import METADATA_NETWORKS, RenderedBundle, host_address
from agent_operator.models import (
    API_VERSION,
    Agent,
    ComponentSpec,
    KnowledgeMount,
    Resources,
    SecretKeyRef,
    TopologySpread,
)
from agent_operator.quantities import quantity
from agent_operator.runtimes import container_run
from agent_operator.settings import RenderSettings
from agent_operator.shared import (
    DEFAULT_DENY,
    POLICY_LABEL,
    SHARED_LABEL,
    policy_name,
    service_account_name,
)
from agent_runtime import contract
from agent_runtime.component_env import (
    ComponentInputs,
    MemoryStoreSettings,
    ModelSettings,
    as_kubernetes,
    component_env,
)
from agent_runtime.connectors.mcp.oauth import DIR_ENV as OAUTH_DIR_ENV
from agent_runtime.connectors.mcp.oauth import SEED_ENV as OAUTH_SEED_ENV
from agent_runtime.connectors.mcp.oauth import SEED_SECRET_PREFIX

MANAGED_BY = "agent-engine-operator"
AGENT_LABEL = "agentengine.io/agent"
COMPONENT_LABEL = "agentengine.io/component"
ROLE_LABEL = "agentengine.io/role"
APPLIED_HASH = "agentengine.io/applied-hash"
BUNDLE_DIGEST = "agentengine.io/bundle-digest"
SECRETS_CHECKSUM = "agentengine.io/secrets-checksum"

COMPONENTS = ("aer", "tool", "memory")
MODES = {
    "aer": contract.RunnerMode.AER,
    "tool": contract.RunnerMode.TOOL,
    "memory": contract.RunnerMode.MEMORY,
}
MEMORY_DATA_DIR = "/var/lib/agent-engine/memory"
# Where `spec.knowledge` entries are mounted in the Tool Pod (a knowledge connector's `config.paths`).
KNOWLEDGE_DIR = "/etc/agent-engine/knowledge"
OE_URL_ENV = "AGENTIC_OE_URL"


@dataclass(frozen=True)
class Desired:
    """One object to converge. `create_only` objects are created once and never patched (immutable
    bundle ConfigMaps; the token Secret, whose value the apply layer generates). `shared` objects serve
    every Agent of the namespace that renders them alike (shared.py)."""

    manifest: dict[str, Any]
    create_only: bool = False
    generate_token: bool = False
    shared: bool = False

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.manifest["apiVersion"], self.manifest["kind"], self.manifest["metadata"]["name"])


def token_secret_name(agent: str) -> str:
    return f"{agent}-runtime-token"


def app_id(agent: Agent) -> str:
    """The workspace id (Decision 1): namespaces have no dots, so the first dot splits it back."""
    return f"{agent.meta.namespace}.{agent.meta.name}"


def component_name(agent: str, component: str) -> str:
    return f"{agent}-{component}"


def canonical_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def secrets_checksum(refs: Sequence[tuple[str, SecretKeyRef]], versions: Mapping[str, str]) -> str:
    """Changes when any Secret a component reads changes (by resourceVersion: no value is ever hashed)."""
    pairs = sorted({(ref.name, ref.key, versions.get(ref.name, "")) for _, ref in refs})
    return canonical_hash(pairs)[:32]


def labels(agent: str, component: str | None = None) -> dict[str, str]:
    out = {
        "app.kubernetes.io/name": "agent-engine",
        "app.kubernetes.io/instance": agent,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        AGENT_LABEL: agent,
    }
    if component:
        out["app.kubernetes.io/component"] = component
        out[COMPONENT_LABEL] = component
    return out


def selector(agent: str, component: str) -> dict[str, str]:
    return {AGENT_LABEL: agent, COMPONENT_LABEL: component}


def owner_reference(agent: Agent) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Agent",
        "name": agent.meta.name,
        "uid": agent.meta.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(agent: Agent, name: str, component: str | None = None, **extra_labels: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": agent.meta.namespace,
        "labels": {**labels(agent.meta.name, component), **extra_labels},
        "ownerReferences": [owner_reference(agent)],
    }


def _shared_metadata(agent: Agent, name: str, component: str | None = None, **extra: str) -> dict[str, Any]:
    """No Agent label and no ownerReference: the operator deletes it when its last user goes."""
    out = {
        "app.kubernetes.io/name": "agent-engine",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        SHARED_LABEL: "true",
    }
    if component:
        out["app.kubernetes.io/component"] = component
        out[COMPONENT_LABEL] = component
    return {"name": name, "namespace": agent.meta.namespace, "labels": {**out, **extra}}


def enabled_components(agent: Agent) -> tuple[str, ...]:
    return ("aer", "tool", "memory") if agent.spec.components.memory.enabled else ("aer", "tool")


def component_spec(agent: Agent, component: str) -> ComponentSpec:
    return getattr(agent.spec.components, component)


def render_objects(
    *,
    agent: Agent,
    bundle: RenderedBundle,
    secret_env: Mapping[str, Sequence[tuple[str, SecretKeyRef]]],
    secret_versions: Mapping[str, str],
    provider_endpoints: Sequence[tuple[str, int]],
    settings: RenderSettings,
    tool_env: Sequence[tuple[str, str]] = (),
    mcp_oauth: Sequence[str] = (),
) -> list[Desired]:
    """Every child object, each stamped with the hash of its own content."""
    name = agent.meta.name
    objects: list[Desired] = [
        Desired(
            manifest=_bundle_config_map(agent, part.name, dict(part.data), bundle.digest),
            create_only=True,
            shared=True,
        )
        for part in bundle.parts
    ]
    objects.append(Desired(manifest=_token_secret(agent), create_only=True, generate_token=True))
    if settings.oe_public_key:
        objects.append(
            Desired(
                manifest=_oe_public_key_config_map(agent, settings.oe_public_key),
                create_only=True,
                shared=True,
            )
        )
    policies, policy_labels = _network_policies(
        agent, provider_endpoints=provider_endpoints, settings=settings
    )
    objects.extend(policies)
    for component in enabled_components(agent):
        objects.append(Desired(manifest=_service_account(agent, component), shared=True))
        objects.append(
            Desired(
                manifest=_deployment(
                    agent,
                    component,
                    bundle=bundle,
                    secret_env=secret_env.get(component, ()),
                    plain_env=tool_env if component == "tool" else (),
                    checksum=secrets_checksum(secret_env.get(component, ()), secret_versions),
                    pod_labels=policy_labels.get(component, {}),
                    settings=settings,
                    mcp_oauth=mcp_oauth if component == "tool" else (),
                )
            )
        )
        objects.append(Desired(manifest=_service(agent, component)))
        if component_spec(agent, component).replicas > 1:
            objects.append(Desired(manifest=_disruption_budget(agent, component)))
    for desired in objects:
        if not desired.create_only:
            meta = desired.manifest["metadata"]
            meta["annotations"] = {
                **meta.get("annotations", {}),
                APPLIED_HASH: canonical_hash(desired.manifest),
            }
    assert len({d.key for d in objects}) == len(objects), f"duplicate child names for Agent {name}"
    return objects


def _bundle_config_map(agent: Agent, name: str, data: dict[str, str], digest: str) -> dict[str, Any]:
    meta = _shared_metadata(agent, name, None, **{ROLE_LABEL: "bundle"})
    meta["annotations"] = {BUNDLE_DIGEST: digest}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "immutable": True, "data": data}


def oe_public_key_config_map_name(pem: str) -> str:
    """Named by the key's digest, like the bundle's: immutable, created once per namespace and key."""
    return f"{contract.OE_PUBLIC_KEY_CONFIGMAP}-{hashlib.sha256(pem.encode()).hexdigest()[:12]}"


def _oe_public_key_config_map(agent: Agent, pem: str) -> dict[str, Any]:
    """The OE's public key in the Agent's namespace (one for its Agents). A new key is a new ConfigMap: the
    pods roll onto it while the OE, refused by a pod still on the old key, signs again with its previous one
    for the grace period (docs/credentials.md)."""
    meta = _shared_metadata(agent, oe_public_key_config_map_name(pem), None, **{ROLE_LABEL: "oe-public-key"})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "immutable": True,
        "data": {contract.OE_PUBLIC_KEY_KEY: pem},
    }


def _token_secret(agent: Agent) -> dict[str, Any]:
    meta = _metadata(agent, token_secret_name(agent.meta.name), None, **{ROLE_LABEL: "runtime-token"})
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque"}


def _service_account(agent: Agent, component: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _shared_metadata(agent, service_account_name(component), component),
        "automountServiceAccountToken": False,
    }


def _service(agent: Agent, component: str) -> dict[str, Any]:
    port = contract.PORTS[MODES[component]]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(agent, component_name(agent.meta.name, component), component),
        "spec": {
            "type": "ClusterIP",
            "selector": selector(agent.meta.name, component),
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _disruption_budget(agent: Agent, component: str) -> dict[str, Any]:
    """A voluntary eviction (a node drain) takes at most one pod of a component with several at a time."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(agent, component_name(agent.meta.name, component), component),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector(agent.meta.name, component)}},
    }


def component_resources(
    given: Resources, defaults: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, int | str]]:
    """The container's requests and limits: what the Agent names, else the platform's defaults, so every pod
    has cpu and memory requests and limits (never BestEffort, no memory request without a limit). A default
    never contradicts what the Agent names: a limit below a default request lowers the request to it, a
    request above a default limit raises the limit to it."""
    requests: dict[str, int | str] = dict(given.requests)
    limits: dict[str, int | str] = dict(given.limits)
    for resource in ("cpu", "memory"):
        default_request = defaults.get("requests", {}).get(resource)
        default_limit = defaults.get("limits", {}).get(resource)
        if resource not in requests and default_request is not None:
            limit = limits.get(resource)
            below = limit is not None and _exceeds(default_request, limit)
            requests[resource] = limit if below and limit is not None else default_request
        if resource not in limits and default_limit is not None:
            request = requests.get(resource)
            above = request is not None and _exceeds(request, default_limit)
            limits[resource] = request if above and request is not None else default_limit
    return {k: v for k, v in (("requests", requests), ("limits", limits)) if v}


def _exceeds(a: int | str, b: int | str) -> bool:
    qa, qb = quantity(a), quantity(b)
    return qa is not None and qb is not None and qa > qb


def _topology_spread(agent: Agent, component: str) -> list[dict[str, Any]]:
    """Spread across nodes by default (ScheduleAnyway: a full or single-node cluster still schedules);
    rendered whatever the replicas, so scaling a component never changes (and rolls) its pods."""
    given = component_spec(agent, component).topology_spread_constraints
    rules = given if given is not None else (TopologySpread(topology_key=HOSTNAME_KEY),)
    return [
        {
            "maxSkew": rule.max_skew,
            "topologyKey": rule.topology_key,
            "whenUnsatisfiable": rule.when_unsatisfiable,
            "labelSelector": {"matchLabels": selector(agent.meta.name, component)},
        }
        for rule in rules
    ]


def component_inputs(agent: Agent, settings: RenderSettings, *, bundle_digest: str) -> ComponentInputs:
    """The Agent's side of its components' environment, with the pod's mount paths."""
    llm = agent.spec.llm
    memory = agent.spec.components.memory
    port = contract.PORTS[contract.RunnerMode.MEMORY]
    return ComponentInputs(
        app_id=app_id(agent),
        entrypoint=agent.spec.entrypoint,
        oe_url=settings.oe_url,
        oe_public_key_file=contract.OE_PUBLIC_KEY_PATH if settings.oe_public_key else None,
        bundle_digest=bundle_digest,
        telemetry=tuple(sorted(settings.telemetry_env.items())),
        model=ModelSettings(
            base_url=llm.base_url,
            model=llm.model,
            key_env=llm.key_env(),
            credential_names=tuple(c.name for c in llm.credentials),
        )
        if llm.base_url
        else None,
        memory_url=f"http://{component_name(agent.meta.name, 'memory')}:{port}" if memory.enabled else None,
        memory_store=MemoryStoreSettings(
            type=memory.store.type,
            sqlite_path=f"{MEMORY_DATA_DIR}/memory.db",
            database=memory.store.database,
        ),
    )


# B-23/L-07: the Tool Pod's MCP OAuth token files, in its writable /tmp (the root filesystem is read-only),
# and the read-only seed a person's login gives.
MCP_OAUTH_DIR = f"{contract.TMP_DIR}/mcp-oauth"
MCP_OAUTH_SEED_DIR = "/etc/agent-engine/mcp-oauth-seed"
TOOL_PLAIN_ENV = "AGENTIC_TOOL_PLAIN_ENV"  # agent_runtime/servers/tenant_workers.py reads the same name


def _container_env(
    agent: Agent,
    component: str,
    secret_env: Sequence[tuple[str, SecretKeyRef]],
    settings: RenderSettings,
    *,
    bundle_digest: str,
    plain_env: Sequence[tuple[str, str]] = (),
) -> list[dict[str, Any]]:
    inputs = component_inputs(agent, settings, bundle_digest=bundle_digest)
    env: list[dict[str, Any]] = as_kubernetes(component_env(MODES[component], inputs))
    platform = list(env)
    env += [{"name": e.name, "value": e.value} for e in component_spec(agent, component).env]
    env += [{"name": env_name, "value": value} for env_name, value in plain_env]
    if component == "tool" and len(env) > len(platform):
        # Which variables are plain values (not from a Secret): tenant tool workers get them without
        # declaring them in required_secrets (servers/tenant_workers.py, issue 36).
        plain = sorted({e["name"] for e in env[len(platform) :]})
        env.append({"name": TOOL_PLAIN_ENV, "value": ",".join(plain)})
    env += [
        {"name": env_name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}
        for env_name, ref in secret_env
    ]
    return env


def _knowledge_volume(entry: KnowledgeMount) -> dict[str, Any]:
    """The volume of one `spec.knowledge` entry: its ConfigMap or Secret, files readable by the pod only."""
    if entry.secret_name is not None:
        return {
            "name": f"knowledge-{entry.name}",
            "secret": {"secretName": entry.secret_name, "defaultMode": 0o440},
        }
    return {
        "name": f"knowledge-{entry.name}",
        "configMap": {"name": entry.config_map_name, "defaultMode": 0o444},
    }


def _deployment(
    agent: Agent,
    component: str,
    *,
    bundle: RenderedBundle,
    secret_env: Sequence[tuple[str, SecretKeyRef]],
    plain_env: Sequence[tuple[str, str]] = (),
    checksum: str,
    pod_labels: Mapping[str, str],
    settings: RenderSettings,
    mcp_oauth: Sequence[str] = (),
) -> dict[str, Any]:
    name = agent.meta.name
    spec = component_spec(agent, component)
    port = contract.PORTS[MODES[component]]
    mounts_bundle = component in ("aer", "tool")
    volumes: list[dict[str, Any]] = [
        {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
        {
            "name": "runtime-token",
            "secret": {
                "secretName": token_secret_name(name),
                "defaultMode": 0o440,
                "items": [{"key": contract.TOKEN_SECRET_KEY, "path": contract.TOKEN_SECRET_KEY}],
            },
        },
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "tmp", "mountPath": contract.TMP_DIR},
        {"name": "runtime-token", "mountPath": contract.TOKEN_MOUNT_DIR, "readOnly": True},
    ]
    if settings.oe_public_key:
        # Only the OE's statements open the routes the OE drives (issue 27); the key is public. Projected,
        # as the bundle is, so a ConfigMap that pods of an older ReplicaSet still mount is kept.
        volumes.append(
            {
                "name": "oe-public-key",
                "projected": {
                    "defaultMode": 0o444,
                    "sources": [
                        {"configMap": {"name": oe_public_key_config_map_name(settings.oe_public_key)}}
                    ],
                },
            }
        )
        mounts.append(
            {"name": "oe-public-key", "mountPath": contract.OE_PUBLIC_KEY_MOUNT_DIR, "readOnly": True}
        )
    annotations = {SECRETS_CHECKSUM: checksum}
    if mounts_bundle:
        volumes.append(
            {
                "name": "bundle",
                "projected": {
                    "defaultMode": 0o444,
                    "sources": [{"configMap": {"name": n}} for n in bundle.config_map_names],
                },
            }
        )
        mounts.append({"name": "bundle", "mountPath": contract.BUNDLE_MOUNT_DIR, "readOnly": True})
        annotations[BUNDLE_DIGEST] = bundle.digest
    if mcp_oauth:
        volumes.append(_mcp_oauth_seed(mcp_oauth))
        mounts.append({"name": "mcp-oauth-seed", "mountPath": MCP_OAUTH_SEED_DIR, "readOnly": True})
    if component == "tool":
        for entry in agent.spec.knowledge:  # issue 37: the knowledge connector's documents, read-only
            volumes.append(_knowledge_volume(entry))
            mounts.append(
                {
                    "name": f"knowledge-{entry.name}",
                    "mountPath": f"{KNOWLEDGE_DIR}/{entry.name}",
                    "readOnly": True,
                }
            )
    if component == "memory" and agent.spec.components.memory.store.type == "sqlite":
        volumes.append({"name": "data", "emptyDir": {}})
        mounts.append({"name": "data", "mountPath": MEMORY_DATA_DIR})
    run = container_run(agent, component, settings)
    container: dict[str, Any] = {
        "name": component,
        "image": run.image,
        "imagePullPolicy": agent.spec.image_pull_policy,
        "command": list(run.command),
        "env": _container_env(
            agent, component, secret_env, settings, bundle_digest=bundle.digest, plain_env=plain_env
        ),
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": contract.READY_PATH, "port": "http"},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": contract.HEALTH_PATH, "port": "http"},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }
    if mcp_oauth:
        container["env"] += [
            {"name": OAUTH_DIR_ENV, "value": MCP_OAUTH_DIR},
            {"name": OAUTH_SEED_ENV, "value": MCP_OAUTH_SEED_DIR},
        ]
    resources = component_resources(spec.resources, settings.default_resources.get(component, {}))
    if resources:
        container["resources"] = resources
    pod_spec: dict[str, Any] = {
        "serviceAccountName": service_account_name(component),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": contract.RUNTIME_UID,
            "runAsGroup": contract.RUNTIME_UID,
            "fsGroup": contract.RUNTIME_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": volumes,
    }
    if spread := _topology_spread(agent, component):
        pod_spec["topologySpreadConstraints"] = spread
    if agent.spec.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in agent.spec.image_pull_secrets]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(agent, component_name(name, component), component),
        "spec": {
            "replicas": spec.replicas,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": selector(name, component)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": {**labels(name, component), **pod_labels}, "annotations": annotations},
                "spec": pod_spec,
            },
        },
    }


def _mcp_oauth_seed(connectors: Sequence[str]) -> dict[str, Any]:
    """Each OAuth MCP connector's `mcp-oauth-<name>` Secret (what `agentengine connectors login` wrote),
    optional: a client_credentials connector needs none, and a login given later appears without a restart."""
    return {
        "name": "mcp-oauth-seed",
        "projected": {
            "defaultMode": 0o440,
            "sources": [
                {
                    "secret": {
                        "name": f"{SEED_SECRET_PREFIX}{connector}",
                        "optional": True,
                        "items": [{"key": f"{connector}.json", "path": f"{connector}.json"}],
                    }
                }
                for connector in connectors
            ],
        },
    }


def url_endpoint(url: str) -> tuple[str, int]:
    """The host and TCP port a base URL reaches."""
    parts = urlsplit(url)
    return (parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))


def provider_ports(base_urls: Sequence[str]) -> list[int]:
    """TCP ports the Tool Pod must reach for its connectors' base URLs."""
    return sorted({url_endpoint(url)[1] for url in base_urls})


def _oe_peer(settings: RenderSettings) -> dict[str, Any]:
    return {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": settings.oe_namespace}},
        "podSelector": {"matchLabels": dict(settings.oe_pod_labels)},
    }


_DNS = {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
HOSTNAME_KEY = "kubernetes.io/hostname"


def _anywhere(settings: RenderSettings) -> list[dict[str, Any]]:
    """Every address but the link-local and metadata ranges (unless the platform allows them): a DNS name
    that resolves there (or a pod's own link-local neighbours) is refused at the packet, not only by name."""
    if settings.allow_metadata_addresses:
        return [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]
    v4 = [str(n) for n in METADATA_NETWORKS if n.version == 4]
    v6 = [str(n) for n in METADATA_NETWORKS if n.version == 6]
    return [{"ipBlock": {"cidr": "0.0.0.0/0", "except": v4}}, {"ipBlock": {"cidr": "::/0", "except": v6}}]


def _to_endpoints(endpoints: Sequence[tuple[str, int]], settings: RenderSettings) -> list[dict[str, Any]]:
    """Egress to the connectors' hosts: an IP-literal host as its own address (/32, /128) on its port; a DNS
    name only as its port to any address (a NetworkPolicy cannot name a host; what it resolves to is not
    known when the policy is written and may change after)."""
    by_name = sorted({port for host, port in endpoints if host_address(host) is None})
    by_address: dict[int, set[str]] = {}
    for host, port in endpoints:
        if (address := host_address(host)) is not None and port not in by_name:
            by_address.setdefault(port, set()).add(f"{address}/{address.max_prefixlen}")
    rules = [
        {"to": [{"ipBlock": {"cidr": cidr}} for cidr in sorted(cidrs)], "ports": _tcp(port)}
        for port, cidrs in sorted(by_address.items())
    ]
    if by_name:
        rules.append({"to": _anywhere(settings), "ports": _tcp(*by_name)})
    return rules


def _to_llm(agent: Agent, settings: RenderSettings) -> list[dict[str, Any]]:
    """The Tool Pod's egress to the model endpoint (port 443 anywhere when the Agent names none)."""
    base_url = agent.spec.llm.base_url
    return _to_endpoints([url_endpoint(base_url)] if base_url else [("", 443)], settings)


# The checkpoint store's credential is the one secret an AER may hold (Decision 9, S2's MONGODB_URI).
CHECKPOINT_URI_ENV = "MONGODB_URI"
MONGODB_PORT = 27017


def _to_checkpoint_store(agent: Agent, settings: RenderSettings) -> list[dict[str, Any]]:
    """The AER's egress to its LangGraph checkpoint store, when its secretEnv gives it one (MongoDB)."""
    if not any(e.name == CHECKPOINT_URI_ENV for e in agent.spec.components.aer.secret_env):
        return []
    return [{"to": _anywhere(settings), "ports": _tcp(MONGODB_PORT)}]


# The Memory server's embeddings settings (agent_runtime/memory/embeddings.py reads the same names).
EMBEDDINGS_PROVIDER_ENV = "MEMORY_EMBEDDINGS_PROVIDER"
EMBEDDINGS_URL_ENV = "MEMORY_EMBEDDINGS_URL"


def _to_embeddings(agent: Agent, settings: RenderSettings) -> list[dict[str, Any]]:
    """The Memory server's egress to its HTTP embeddings provider (X-08), when the Agent configures one:
    its host and port, as for the connectors' endpoints. The local model needs none."""
    env = {e.name: e.value for e in agent.spec.components.memory.env}
    provider = env.get(EMBEDDINGS_PROVIDER_ENV, "").strip().lower() or "local"
    url = env.get(EMBEDDINGS_URL_ENV, "").strip()
    if provider == "local" or not url.startswith(("http://", "https://")):
        return []
    return _to_endpoints([url_endpoint(url)], settings)


def _tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def _shared_policy(agent: Agent, component: str, rules: dict[str, Any]) -> tuple[Desired, str]:
    """A component's rules as a NetworkPolicy named by their digest: Agents with the same rules share it.
    Returns it and the digest, which the component's pods carry as a label to be selected."""
    digest = canonical_hash(rules)[:10]
    manifest = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _shared_metadata(agent, policy_name(component, digest), component),
        "spec": {"podSelector": {"matchLabels": {COMPONENT_LABEL: component, POLICY_LABEL: digest}}, **rules},
    }
    return Desired(manifest=manifest, shared=True), digest


def _rules(
    component: str, *, ingress_from: list[dict[str, Any]], egress: list[dict[str, Any]]
) -> dict[str, Any]:
    """Who may reach `component` on its own port, and where it may go; everything else stays denied."""
    port = contract.PORTS[MODES[component]]
    return {
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": ingress_from, "ports": _tcp(port)}],
        "egress": egress,
    }


def _network_policies(
    agent: Agent, *, provider_endpoints: Sequence[tuple[str, int]], settings: RenderSettings
) -> tuple[list[Desired], dict[str, dict[str, str]]]:
    """The trust table as NetworkPolicies: deny everything for every Agent's pods, then allow each
    component's paths. Per-Agent separation rests on ingress: an AER and a Tool Pod admit only the OE, and a
    Memory server only its own Agent's pods and the OE (its policy is the Agent's own), so egress rules can
    be shared.
    Returns the policies and, per component, the pod labels that select its policy."""
    name = agent.meta.name
    memory = agent.spec.components.memory.enabled
    to_memory = (
        [
            {
                "to": [{"podSelector": {"matchLabels": {COMPONENT_LABEL: "memory"}}}],
                "ports": _tcp(contract.PORTS[contract.RunnerMode.MEMORY]),
            }
        ]
        if memory
        else []
    )
    to_providers = _to_endpoints(provider_endpoints, settings)
    deny = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _shared_metadata(agent, DEFAULT_DENY),
        "spec": {
            "podSelector": {"matchExpressions": [{"key": AGENT_LABEL, "operator": "Exists"}]},
            "policyTypes": ["Ingress", "Egress"],
        },
    }
    policies = [Desired(manifest=deny, shared=True)]
    pod_labels: dict[str, dict[str, str]] = {}
    component_rules = {
        "aer": _rules(
            "aer",
            ingress_from=[_oe_peer(settings)],
            # No route to the LLM API: model calls run in the Tool Pod (Decision 9).
            egress=[
                {"to": [_oe_peer(settings)], "ports": _tcp(contract.PORTS[contract.RunnerMode.OE])},
                *to_memory,
                *_to_checkpoint_store(agent, settings),
                _DNS,
            ],
        ),
        "tool": _rules(
            "tool",
            ingress_from=[_oe_peer(settings)],
            egress=[*to_providers, *_to_llm(agent, settings), *to_memory, _DNS],
        ),
    }
    for component, rules in component_rules.items():
        policy, digest = _shared_policy(agent, component, rules)
        policies.append(policy)
        pod_labels[component] = {POLICY_LABEL: digest}
    if memory:
        mongodb = agent.spec.components.memory.store.type == "mongodb"
        store_egress = [{"to": _anywhere(settings), "ports": _tcp(MONGODB_PORT)}] if mongodb else []
        callers = [{"podSelector": {"matchLabels": selector(name, c)}} for c in ("aer", "tool")]
        # The OE forwards clients' knowledge documents (issue 37), with its own statement for this Agent.
        callers.append(_oe_peer(settings))
        policies.append(
            Desired(
                manifest={
                    "apiVersion": "networking.k8s.io/v1",
                    "kind": "NetworkPolicy",
                    "metadata": _metadata(agent, component_name(name, "memory"), "memory"),
                    "spec": {
                        "podSelector": {"matchLabels": selector(name, "memory")},
                        **_rules(
                            "memory",
                            ingress_from=callers,
                            egress=[*store_egress, *_to_embeddings(agent, settings), _DNS],
                        ),
                    },
                }
            )
        )
    return policies, pod_labels
