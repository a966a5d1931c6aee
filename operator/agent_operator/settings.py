"""Operator settings, read once from the environment (the Helm chart sets them)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_operator.quantities import quantity
from agent_runtime.execution_token import normalize_public_key_pem
from agent_runtime.telemetry_env import telemetry_env
from agent_runtime.token_file import TokenSettingError

FIELD_MANAGER = "agent-engine-operator"
COMPONENT_NAMES = ("aer", "tool", "memory")
# (cpu request, memory request, cpu limit, memory limit) per component: small requests so a node packs many
# Agents, limits that hold one tenant to a bounded share of a node (the chart's values repeat them).
DEFAULT_RESOURCES = {
    "aer": ("50m", "128Mi", "1", "512Mi"),
    "tool": ("50m", "128Mi", "1", "512Mi"),
    "memory": ("50m", "128Mi", "500m", "512Mi"),
}


def _resources(values: tuple[str, str, str, str]) -> dict[str, dict[str, str]]:
    cpu, memory, cpu_limit, memory_limit = values
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu_limit, "memory": memory_limit}}


TELEMETRY_ENV = "AGENT_OPERATOR_TELEMETRY_ENV"


class RenderSettings(BaseModel):
    """What rendering needs beyond the Agent: where the OE runs and how large one ConfigMap may be."""

    model_config = ConfigDict(frozen=True)

    oe_namespace: str = "agent-engine"
    # Where the registration Secrets go; empty: the OE's namespace. The chart gives them a namespace of their
    # own, so the OE's RBAC can read registrations and no other Secret (issue 43).
    registrations_namespace: str = ""
    oe_pod_labels: dict[str, str] = Field(
        default_factory=lambda: {
            "app.kubernetes.io/name": "agent-engine",
            "app.kubernetes.io/component": "oe",
        }
    )
    oe_url: str = "http://agent-engine-oe.agent-engine.svc:8080"
    # The OE's ServiceAccount (in oe_namespace): an Agent's console-consent Role binds it (consent_access.py).
    oe_service_account: str = "agent-engine-oe"
    # For Agents that name no image (the chart sets it from image.runtime).
    default_image: str | None = None
    # For Agents with spec.runtime node that name no image (the chart sets it from image.nodeRuntime).
    default_node_image: str | None = None
    # The API server refuses ConfigMaps over 1 MiB; keep room for keys and metadata.
    configmap_budget_bytes: int = 900_000
    max_bundle_configmaps: int = 8
    # Requests and limits every Agent component gets where its spec.components.<c>.resources names none
    # (the chart's agents.resources): no BestEffort pod, no memory request without a limit.
    default_resources: dict[str, dict[str, dict[str, str]]] = Field(
        default_factory=lambda: {c: _resources(r) for c, r in DEFAULT_RESOURCES.items()}
    )
    # Connectors and model endpoints at link-local or cloud metadata addresses are refused, and the Agents'
    # egress excepts those ranges, unless the platform allows them (agents.allowMetadataAddresses).
    allow_metadata_addresses: bool = False
    # The OE's public key (PEM; the chart mounts its ConfigMap into the operator and names the file in
    # AGENT_OPERATOR_OE_PUBLIC_KEY_FILE): rendered into each Agent namespace and mounted in every component,
    # so only the OE's signed statements open the routes it drives (issue 27). Empty: not rendered.
    oe_public_key: str = ""
    # OTEL_* and the platform's tracing/execution-log variables for every component (the chart's
    # observability values, AGENT_OPERATOR_TELEMETRY_ENV): agent_runtime.telemetry_env checks them.
    telemetry_env: dict[str, str] = Field(default_factory=dict)

    @property
    def registration_namespace(self) -> str:
        """The namespace the operator publishes registrations into."""
        return self.registrations_namespace or self.oe_namespace


class OperatorSettings(BaseModel):
    """Process-level settings: scope, peering, probes, resync."""

    model_config = ConfigDict(frozen=True)

    namespaces: tuple[str, ...] = ()  # empty: every namespace (cluster-wide RBAC)
    peering: str | None = None  # kopf peering name; None: standalone (one replica)
    priority: int | None = None  # kopf peering priority; None: random per process (one active replica)
    # Loopback: a local run exposes nothing; in a pod the chart sets 0.0.0.0 for the kubelet's probe.
    liveness_endpoint: str = "http://127.0.0.1:8080/healthz"
    resync_seconds: float = 300.0
    # Catalogs compile in a worker process with these limits (0 seconds: inline, no worker, no limits).
    compile_timeout_seconds: float = 20.0
    compile_memory_bytes: int = 192 * 1024 * 1024
    api_connections: int = 8  # concurrent requests of the operator's own client
    log_format: Literal["json", "text"] = "json"
    render: RenderSettings = Field(default_factory=RenderSettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OperatorSettings:
        """AGENT_OPERATOR_* variables; a missing one keeps its default."""
        render: dict[str, object] = {}
        if value := env.get("AGENT_OPERATOR_OE_NAMESPACE"):
            render["oe_namespace"] = value
        if value := env.get("AGENT_OPERATOR_REGISTRATIONS_NAMESPACE"):
            render["registrations_namespace"] = value
        if value := env.get("AGENT_OPERATOR_OE_URL"):
            render["oe_url"] = value
        if value := env.get("AGENT_OPERATOR_OE_SERVICE_ACCOUNT"):
            render["oe_service_account"] = value
        if value := env.get("AGENT_OPERATOR_DEFAULT_IMAGE"):
            render["default_image"] = value
        if value := env.get("AGENT_OPERATOR_DEFAULT_NODE_IMAGE"):
            render["default_node_image"] = value
        if value := env.get("AGENT_OPERATOR_OE_POD_LABELS"):
            render["oe_pod_labels"] = _parse_labels(value, name="AGENT_OPERATOR_OE_POD_LABELS")
        if value := env.get("AGENT_OPERATOR_CONFIGMAP_BUDGET_BYTES"):
            render["configmap_budget_bytes"] = int(value)
        if value := env.get("AGENT_OPERATOR_DEFAULT_RESOURCES"):
            render["default_resources"] = parse_default_resources(value)
        if value := env.get("AGENT_OPERATOR_ALLOW_METADATA_ADDRESSES"):
            render["allow_metadata_addresses"] = _parse_bool(
                value, name="AGENT_OPERATOR_ALLOW_METADATA_ADDRESSES"
            )
        if value := env.get("AGENT_OPERATOR_OE_PUBLIC_KEY_FILE"):
            render["oe_public_key"] = _read_public_key(value)
        if value := env.get(TELEMETRY_ENV):
            render["telemetry_env"] = telemetry_env(value, setting=TELEMETRY_ENV)
        fields: dict[str, object] = {"render": RenderSettings(**render)}  # type: ignore[arg-type]
        if value := env.get("AGENT_OPERATOR_NAMESPACES"):
            fields["namespaces"] = tuple(ns.strip() for ns in value.split(",") if ns.strip())
        if value := env.get("AGENT_OPERATOR_PEERING"):
            fields["peering"] = value
        if value := env.get("AGENT_OPERATOR_PRIORITY"):
            fields["priority"] = int(value)
        if value := env.get("AGENT_OPERATOR_LIVENESS"):
            fields["liveness_endpoint"] = value
        if value := env.get("AGENT_OPERATOR_RESYNC_SECONDS"):
            fields["resync_seconds"] = float(value)
        if value := env.get("AGENT_OPERATOR_API_CONNECTIONS"):
            fields["api_connections"] = int(value)
        if value := env.get("AGENT_OPERATOR_COMPILE_TIMEOUT_SECONDS"):
            fields["compile_timeout_seconds"] = float(value)
        if value := env.get("AGENT_OPERATOR_COMPILE_MEMORY_BYTES"):
            fields["compile_memory_bytes"] = int(value)
        if value := env.get("AGENT_OPERATOR_LOG_FORMAT"):
            if value not in ("json", "text"):
                raise ValueError(f"AGENT_OPERATOR_LOG_FORMAT={value!r}: write json or text")
            fields["log_format"] = value
        return cls(**fields)  # type: ignore[arg-type]


def _parse_labels(text: str, *, name: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or not key:
            raise ValueError(f"{name}: {item!r} is not key=value; write e.g. app.kubernetes.io/component=oe")
        labels[key] = value
    return labels


def _read_public_key(path: str) -> str:
    """The OE's public key file's text; a missing or empty file names the setting."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(
            f"AGENT_OPERATOR_OE_PUBLIC_KEY_FILE={path}: cannot read it ({type(exc).__name__})"
        ) from None
    try:
        # Normalized to the key's own PEM: the ConfigMap is named by its digest, so a certificate the chart
        # re-makes around the same key (every helm upgrade) must give the same text and roll no Agent pod.
        return normalize_public_key_pem(text)
    except TokenSettingError:
        raise ValueError(
            f"AGENT_OPERATOR_OE_PUBLIC_KEY_FILE={path}: not a PEM Ed25519 public key or a certificate "
            "carrying one; copy the OE's public key (the chart's ConfigMap <release>-oe-public-key)"
        ) from None


def _parse_bool(text: str, *, name: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"{name}={text!r}: write true or false")


def parse_default_resources(text: str) -> dict[str, dict[str, dict[str, str]]]:
    """AGENT_OPERATOR_DEFAULT_RESOURCES: JSON {component: {requests: {cpu, memory}, limits: {...}}}; a
    component or quantity it leaves out keeps the built-in default."""
    name = "AGENT_OPERATOR_DEFAULT_RESOURCES"
    example = '{"aer": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}}'
    try:
        given = json.loads(text)
    except ValueError:
        raise ValueError(f"{name} is not JSON; write e.g. {example}") from None
    if not isinstance(given, dict) or set(given) - set(COMPONENT_NAMES):
        raise ValueError(f"{name}: name components {list(COMPONENT_NAMES)} only; write e.g. {example}")
    out = {c: _resources(r) for c, r in DEFAULT_RESOURCES.items()}
    for component, resources in given.items():
        if not isinstance(resources, dict) or set(resources) - {"requests", "limits"}:
            raise ValueError(f"{name}: {component} takes requests and limits only; write e.g. {example}")
        for kind, quantities in resources.items():
            if not isinstance(quantities, dict) or set(quantities) - {"cpu", "memory"}:
                raise ValueError(
                    f"{name}: {component}.{kind} takes cpu and memory only; write e.g. {example}"
                )
            for resource, value in quantities.items():
                if quantity(value) is None:
                    raise ValueError(
                        f"{name}: {component}.{kind}.{resource} must be a quantity such as 256Mi"
                    )
                out[component][kind][resource] = str(value)
    for component, resources in out.items():
        for resource, request in resources["requests"].items():
            limit = resources["limits"][resource]
            if quantity(request) > quantity(limit):  # type: ignore[operator]
                raise ValueError(
                    f"{name}: {component}.requests.{resource} {request} is above its limit {limit}; "
                    "lower the request or raise the limit"
                )
    return out
