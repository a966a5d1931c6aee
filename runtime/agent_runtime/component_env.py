"""The platform environment of one component (AER, Tool Pod, Memory), as one pure function.

The operator renders it into each Deployment (paths are the pod's mounts, the pod IP comes from the downward
API); `agentengine dev` runs the same components as local processes with local paths. Both call
`component_env`, so what a local run and a cluster see cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from agent_runtime import contract
from agent_runtime.contract import RunnerMode

MEMORY_URL_ENV = "AGENTIC_MEMORY_URL"
MEMORY_STORE_TYPE_ENV = "MEMORY_STORE_TYPE"
MEMORY_SQLITE_PATH_ENV = "MEMORY_SQLITE_PATH"
MEMORY_MONGODB_DATABASE_ENV = "MEMORY_MONGODB_DATABASE"
# The downward API field a pod's own address comes from (Decision 8).
POD_IP_FIELD = "status.podIP"


class EnvVar(NamedTuple):
    """One variable: a literal value, or (field_path set) a value the kubelet fills in from the pod."""

    name: str
    value: str = ""
    field_path: str | None = None


@dataclass(frozen=True)
class ModelSettings:
    """Where the model is: both runtimes build the model object, only the Tool Pod holds its key."""

    base_url: str
    model: str | None = None
    key_env: str | None = None  # the variable's name, never the key
    credential_names: tuple[str, ...] = ()  # env names routed from the Agent's LLM credentials


@dataclass(frozen=True)
class MemoryStoreSettings:
    """The Memory server's store."""

    type: str = "sqlite"
    sqlite_path: str | None = None
    database: str | None = None


@dataclass(frozen=True)
class ComponentInputs:
    """What a component's environment is made of. Paths default to the pod's mounts."""

    app_id: str  # `<namespace>.<agent>` (Decision 1)
    entrypoint: str
    oe_url: str
    token_file: str = contract.TOKEN_FILE_PATH
    oe_public_key_file: str | None = None  # None: the OE signs nothing (no key rendered)
    bundle_path: str = contract.BUNDLE_INDEX_PATH
    bundle_digest: str | None = None
    model: ModelSettings | None = None
    memory_url: str | None = None  # set when the Agent has a Memory server
    memory_store: MemoryStoreSettings = field(default_factory=MemoryStoreSettings)
    pod_ip: str | None = None  # None: from the downward API (a pod); a literal for a local process
    # OTEL_* and the platform's tracing and execution-log settings, the same in every component (issue 33;
    # checked by agent_runtime.telemetry_env).
    telemetry: tuple[tuple[str, str], ...] = ()


def component_env(component: RunnerMode, inputs: ComponentInputs) -> list[EnvVar]:
    """The platform variables of `component`, in the order the operator renders them."""
    runtime = component in (RunnerMode.AER, RunnerMode.TOOL)
    env = [
        EnvVar(contract.RUNNER_MODE_ENV, component.value),
        EnvVar(contract.TOKEN_FILE_ENV, inputs.token_file),
        *(
            [EnvVar(contract.OE_PUBLIC_KEY_FILE_ENV, inputs.oe_public_key_file)]
            if inputs.oe_public_key_file
            else []
        ),
        EnvVar(contract.STRUCTURED_LOGGING_ENV, "true"),
        EnvVar(contract.APP_ID_ENV, inputs.app_id),
    ]
    if runtime:
        env += [
            EnvVar(contract.ENTRYPOINT_ENV, inputs.entrypoint),
            EnvVar(contract.BUNDLE_PATH_ENV, inputs.bundle_path),
            # Each answer names this process's own address, so the OE drains and interrupts it directly
            # rather than through the Service, which may pick another replica (Decision 8).
            EnvVar(contract.POD_IP_ENV, inputs.pod_ip)
            if inputs.pod_ip is not None
            else EnvVar(contract.POD_IP_ENV, field_path=POD_IP_FIELD),
        ]
    if component == RunnerMode.AER:
        env.append(EnvVar(contract.OE_URL_ENV, inputs.oe_url))
        env.append(EnvVar(contract.REQUIRE_PROJECT_SCOPED_DB_ENV, "true"))
    if runtime and inputs.model is not None and inputs.model.base_url:
        env += _model_env(component, inputs.model)
    if runtime and inputs.memory_url:
        env.append(EnvVar(MEMORY_URL_ENV, inputs.memory_url))
    if component == RunnerMode.MEMORY:
        store = inputs.memory_store
        env.append(EnvVar(MEMORY_STORE_TYPE_ENV, store.type))
        if store.type == "sqlite" and store.sqlite_path:
            env.append(EnvVar(MEMORY_SQLITE_PATH_ENV, store.sqlite_path))
        if store.database:
            env.append(EnvVar(MEMORY_MONGODB_DATABASE_ENV, store.database))
    if (
        runtime and inputs.bundle_digest is not None
    ):  # the runtime refuses a mounted bundle with another digest
        env.append(EnvVar(contract.BUNDLE_DIGEST_ENV, inputs.bundle_digest))
    env += [EnvVar(name, value) for name, value in inputs.telemetry]
    return env


def _model_env(component: RunnerMode, model: ModelSettings) -> list[EnvVar]:
    env = [EnvVar(contract.LLM_BASE_URL_ENV, model.base_url)]
    if model.model:
        env.append(EnvVar(contract.LLM_MODEL_ENV, model.model))
    if model.key_env is not None:
        env.append(EnvVar(contract.LLM_API_KEY_ENV_ENV, model.key_env))
    if component == RunnerMode.TOOL and model.credential_names:
        env.append(EnvVar(contract.LLM_CREDENTIAL_NAMES_ENV, ",".join(model.credential_names)))
    return env


def as_kubernetes(env: Sequence[EnvVar]) -> list[dict[str, object]]:
    """A container's `env` list. apiVersion is what the API server would default a fieldRef to: rendered
    as stored, it is never seen as drift."""
    return [
        {"name": e.name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": e.field_path}}}
        if e.field_path
        else {"name": e.name, "value": e.value}
        for e in env
    ]


def as_process(env: Sequence[EnvVar]) -> dict[str, str]:
    """A local process's environment; a variable only a pod can fill in must have been given a value."""
    out: dict[str, str] = {}
    for e in env:
        if e.field_path:
            raise ValueError(f"{e.name} comes from the pod's {e.field_path}; give ComponentInputs a value")
        out[e.name] = e.value
    return out
