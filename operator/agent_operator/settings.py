"""Operator settings, read once from the environment (the Helm chart sets them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FIELD_MANAGER = "agent-engine-operator"


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
    # For Agents that name no image (the chart sets it from image.runtime).
    default_image: str | None = None
    # The API server refuses ConfigMaps over 1 MiB; keep room for keys and metadata.
    configmap_budget_bytes: int = 900_000
    max_bundle_configmaps: int = 8

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
        if value := env.get("AGENT_OPERATOR_DEFAULT_IMAGE"):
            render["default_image"] = value
        if value := env.get("AGENT_OPERATOR_OE_POD_LABELS"):
            render["oe_pod_labels"] = _parse_labels(value, name="AGENT_OPERATOR_OE_POD_LABELS")
        if value := env.get("AGENT_OPERATOR_CONFIGMAP_BUDGET_BYTES"):
            render["configmap_budget_bytes"] = int(value)
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
