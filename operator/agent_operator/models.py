"""Pydantic models of the Agent and Connector resources (crds/ is the schema the API server enforces).

The API server already validated and defaulted what we read; these models give the operator typed access
and re-apply the defaults, so a unit test can build a spec from a few fields.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agent_runtime.contract import Runtime
from agent_runtime.oe.limits import Limits
from agent_runtime.oe.policy import ToolPolicy
from agent_runtime.oe.usage import PriceTable

GROUP = "agentengine.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
AGENT_PLURAL = "agents"
CONNECTOR_PLURAL = "connectors"


class Spec(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are ignored (the CRD prunes them)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


class ConfigMapKeyRef(Spec):
    name: str
    key: str


class SecretKeyRef(Spec):
    name: str
    key: str


class SecretEnv(Spec):
    """An environment variable whose value comes from a Secret key."""

    name: str
    secret_key_ref: SecretKeyRef


class PlainEnv(Spec):
    name: str
    value: str = ""


class Resources(Spec):
    requests: dict[str, int | str] = Field(default_factory=dict)
    limits: dict[str, int | str] = Field(default_factory=dict)


# Connector -----------------------------------------------------------------------------------------------


class AuthType(StrEnum):
    NONE = "none"
    BEARER = "bearer"
    API_KEY = "api_key"
    BASIC = "basic"
    PATH = "path"


class ConnectorSource(Spec):
    # openapi, or a registered built-in type (the CRD's enum; agent_runtime.connectors.builtin.registry)
    type: str = "openapi"
    base_url: str | None = None  # openapi only


class ConnectorCatalog(Spec):
    config_map_key_ref: ConfigMapKeyRef


class ConnectorExpose(Spec):
    allow: tuple[str, ...] | None = None


class ConnectorAuth(Spec):
    type: AuthType = AuthType.NONE
    env: str | None = None
    location: Literal["header", "query", "cookie"] | None = Field(default=None, alias="in")
    name: str | None = None
    secret_key_ref: SecretKeyRef | None = None


class ConnectorCredential(Spec):
    """A built-in connector's secret (`field`, e.g. password), delivered to the Tool Pod only, as `env`."""

    field: str
    env: str
    secret_key_ref: SecretKeyRef


class ConnectorTls(Spec):
    """The provider's CA (PEM) from exactly one of a ConfigMap key or a Secret key (the CRD's rule)."""

    ca_config_map_key_ref: ConfigMapKeyRef | None = None
    ca_secret_key_ref: SecretKeyRef | None = None


class ConnectorSpec(Spec):
    source: ConnectorSource
    catalog: ConnectorCatalog | None = None  # openapi only
    expose: ConnectorExpose = Field(default_factory=ConnectorExpose)
    auth: ConnectorAuth | None = None  # openapi only
    config: dict[str, Any] = Field(default_factory=dict)  # built-in types: checked against the type's schema
    credentials: tuple[ConnectorCredential, ...] = ()  # built-in types
    tls: ConnectorTls | None = None  # openapi with an https base URL only
    # openapi only: default headers (an API version header...), never a secret (checked in bundle.py)
    headers: dict[str, str] | None = None

    @property
    def is_builtin(self) -> bool:
        return self.source.type != "openapi"


# Agent ---------------------------------------------------------------------------------------------------


class LlmSpec(Spec):
    """The model endpoint the Agent's `app.llm` models use; its credentials reach the Tool Pod only."""

    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None  # which credential holds the API key (default: the first one)
    credentials: tuple[SecretEnv, ...] = ()

    def key_env(self) -> str | None:
        if self.api_key_env:
            return self.api_key_env
        return self.credentials[0].name if self.credentials else None


class TopologySpread(Spec):
    """One spread rule for a component's pods; the operator selects the component's own pods."""

    topology_key: str
    max_skew: int = 1
    when_unsatisfiable: Literal["ScheduleAnyway", "DoNotSchedule"] = "ScheduleAnyway"


class ComponentSpec(Spec):
    replicas: int = 1
    resources: Resources = Field(default_factory=Resources)
    # None: the default spread (across nodes, ScheduleAnyway); an empty list: none at all.
    topology_spread_constraints: tuple[TopologySpread, ...] | None = None
    env: tuple[PlainEnv, ...] = ()
    secret_env: tuple[SecretEnv, ...] = ()


class MemoryStore(Spec):
    type: Literal["sqlite", "mongodb"] = "sqlite"
    database: str | None = None
    uri_secret_ref: SecretKeyRef | None = None


class MemorySpec(ComponentSpec):
    enabled: bool = False
    store: MemoryStore = Field(default_factory=MemoryStore)


class Components(Spec):
    aer: ComponentSpec = Field(default_factory=ComponentSpec)
    tool: ComponentSpec = Field(default_factory=ComponentSpec)
    memory: MemorySpec = Field(default_factory=MemorySpec)


class NotifySpec(Spec):
    """One `spec.notify` target (issue 34): a signed webhook, or a Slack channel through a slack Connector's
    token. The operator resolves the Secrets into the registration (agent_operator/notify_targets.py)."""

    type: Literal["webhook", "slack"]
    url: str | None = None
    signing_secret_ref: SecretKeyRef | None = None
    connector: str | None = None
    channel: str | None = None


class AgentRefSpec(Spec):
    """One `spec.agentRefs` entry (issue 38): another Agent this one calls as a tool, which the OE runs as a
    child execution as the parent's user (agent_runtime/oe/children.py)."""

    name: str  # the Agent's name
    namespace: str | None = None  # None: the Agent's own namespace
    tool: str | None = None  # None: agent.<name> (agent.<namespace>.<name> for another namespace)
    description: str = ""
    sensitive: bool = False


class KnowledgeMount(Spec):
    """One `spec.knowledge` entry (issue 37): a ConfigMap or Secret of documents mounted into the Tool Pod."""

    name: str
    config_map_name: str | None = None
    secret_name: str | None = None


class AgentSpec(Spec):
    image: str | None = None  # None: the operator's default runtime image for `runtime`
    # Which runner the image holds (python: agent_runtime.launcher; node: the TypeScript runner's launcher).
    # Absent on Agents written before it: the Python runner, as they always ran.
    runtime: Runtime = Runtime.PYTHON
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    image_pull_secrets: tuple[str, ...] = ()
    entrypoint: str
    connectors: tuple[str, ...] = ()
    agent_refs: tuple[AgentRefSpec, ...] = ()  # issue 38: other Agents called as tools, through the OE
    knowledge: tuple[KnowledgeMount, ...] = ()  # issue 37: documents mounted into the Tool Pod
    llm: LlmSpec = Field(default_factory=LlmSpec)
    tools: ToolPolicy = Field(default_factory=ToolPolicy)
    limits: Limits = Field(default_factory=Limits)  # issue 34: enforced by the OE, from the registration
    notify: tuple[NotifySpec, ...] = ()  # issue 34: where reviews are announced
    pricing: PriceTable | None = None  # issue 33: the Agent's model prices, over the chart's table
    components: Components = Field(default_factory=Components)


# Resource envelopes --------------------------------------------------------------------------------------


class ObjectRef(Spec):
    """The metadata the operator needs from a resource it reads."""

    name: str
    namespace: str
    uid: str = ""
    generation: int = 0


class Resource(Spec):
    """A resource as the operator reads it: its identity, spec (typed by the subclass) and status."""

    meta: ObjectRef
    status: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Self:
        return cls.model_validate(
            {"meta": _meta(body), "spec": body.get("spec") or {}, "status": _status(body)}
        )


class Agent(Resource):
    spec: AgentSpec


class Connector(Resource):
    spec: ConnectorSpec


def _meta(body: dict[str, Any]) -> ObjectRef:
    meta = body.get("metadata") or {}
    return ObjectRef(
        name=meta.get("name", ""),
        namespace=meta.get("namespace", ""),
        uid=meta.get("uid", ""),
        generation=int(meta.get("generation") or 0),
    )


def _status(body: dict[str, Any]) -> dict[str, Any]:
    return dict(body.get("status") or {})
