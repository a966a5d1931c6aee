"""The env/paths contract between the runtime image and the pods the operator renders.

Both sides import these names; the operator may import `agent_runtime`, never the reverse.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final


class RunnerMode(StrEnum):
    """Which component one runtime process is; the value of `RUNNER_MODE`."""

    AER = "aer"
    TOOL = "tool"
    MEMORY = "memory"
    OE = "oe"


# Image command and component selection.
LAUNCHER_MODULE: Final = "agent_runtime.launcher"
IMAGE_COMMAND: Final = ("python", "-m", LAUNCHER_MODULE)


class Runtime(StrEnum):
    """Which runner an Agent's image holds (the Agent's `spec.runtime`): the Python one or the TypeScript
    one (runtime-ts/packages/runner). Both speak the same wire contracts on the same ports."""

    PYTHON = "python"
    NODE = "node"


# The Node runtime image (images/node-runtime) links the TypeScript runner's launcher here, whatever the
# workspace layout behind it; it runs the AER and the Tool Pod (RUNNER_MODE aer or tool, never memory).
NODE_LAUNCHER_PATH: Final = "/opt/agent-engine/runner/launcher.js"
NODE_IMAGE_COMMAND: Final = ("node", NODE_LAUNCHER_PATH)
IMAGE_COMMANDS: Final[Mapping[Runtime, tuple[str, ...]]] = MappingProxyType(
    {Runtime.PYTHON: IMAGE_COMMAND, Runtime.NODE: NODE_IMAGE_COMMAND}
)
RUNNER_MODE_ENV: Final = "RUNNER_MODE"
PORTS: Final[Mapping[RunnerMode, int]] = MappingProxyType(
    {RunnerMode.AER: 8001, RunnerMode.TOOL: 8002, RunnerMode.MEMORY: 8081, RunnerMode.OE: 8080}
)

# Connector bundle: a ConfigMap with flat keys, mounted read-only; the env names its index file.
BUNDLE_MOUNT_DIR: Final = "/etc/agent-engine/bundle"
BUNDLE_INDEX_KEY: Final = "index.yaml"
BUNDLE_INDEX_PATH: Final = f"{BUNDLE_MOUNT_DIR}/{BUNDLE_INDEX_KEY}"
BUNDLE_PATH_ENV: Final = "AGENTIC_CONNECTOR_BUNDLE_PATH"
# The bundle's digest as the operator rendered it: the AER and Tool Pod refuse to start on any other bundle.
BUNDLE_DIGEST_ENV: Final = "AGENTIC_CONNECTOR_BUNDLE_DIGEST"

# Tenant code.
ENTRYPOINT_ENV: Final = "AGENT_ENTRYPOINT"

# Where components reach the Orchestration Engine (rendered by the operator; read once the OE exists).
OE_URL_ENV: Final = "AGENTIC_OE_URL"

# The model the Tool Pod's LLM client calls (an OpenAI-compatible chat-completions endpoint). The key env
# names the variable that holds the API key, never the key; all three are platform variables (AGENTIC_).
LLM_BASE_URL_ENV: Final = "AGENTIC_LLM_BASE_URL"
LLM_MODEL_ENV: Final = "AGENTIC_LLM_MODEL"
LLM_API_KEY_ENV_ENV: Final = "AGENTIC_LLM_API_KEY_ENV"

# Bearer token between components: a Secret key mounted read-only as a file (RUNTIME_TOKEN for local runs).
# These are names and paths, not secrets.
TOKEN_MOUNT_DIR: Final = "/etc/agent-engine/token"  # noqa: S105
TOKEN_SECRET_KEY: Final = "token"  # noqa: S105
TOKEN_FILE_PATH: Final = f"{TOKEN_MOUNT_DIR}/{TOKEN_SECRET_KEY}"
TOKEN_FILE_ENV: Final = "RUNTIME_TOKEN_FILE"  # noqa: S105
TOKEN_ENV: Final = "RUNTIME_TOKEN"  # noqa: S105

# The OE's signing key (issue 27): the OE holds the private key (PEM, PKCS#8, from the chart's Secret);
# the AER, the Tool Pod and the Memory server hold only its public key (PEM, from a ConfigMap the operator
# renders in each Agent namespace). The OE signs a statement for every call it makes to them.
OE_SIGNING_KEY_FILE_ENV: Final = "AGENTIC_OE_SIGNING_KEY_FILE"
OE_PUBLIC_KEY_FILE_ENV: Final = "AGENTIC_OE_PUBLIC_KEY_FILE"
OE_KEY_GRACE_ENV: Final = "AGENTIC_OE_KEY_GRACE_S"
OE_SIGNING_KEY_MOUNT_DIR: Final = "/etc/agent-engine/oe-signing-key"
OE_PUBLIC_KEY_MOUNT_DIR: Final = "/etc/agent-engine/oe-public-key"
OE_SIGNING_KEY_KEY: Final = "signing-key.pem"
OE_PUBLIC_KEY_KEY: Final = "public-key.pem"
OE_SIGNING_KEY_PATH: Final = f"{OE_SIGNING_KEY_MOUNT_DIR}/{OE_SIGNING_KEY_KEY}"
OE_PUBLIC_KEY_PATH: Final = f"{OE_PUBLIC_KEY_MOUNT_DIR}/{OE_PUBLIC_KEY_KEY}"
# The ConfigMap (one per Agent namespace, shared by its Agents) holding the OE's public key.
OE_PUBLIC_KEY_CONFIGMAP: Final = "agent-engine-oe-public-key"

# Logging and listener.
STRUCTURED_LOGGING_ENV: Final = "STRUCTURED_LOGGING"
APP_HOST_ENV: Final = "APP_HOST"

# A managed runtime's identity (Decision 1): `<namespace>.<agent-name>` in every component; the AER also
# gets REQUIRE_PROJECT_SCOPED_DB=true, so its checkpoints can only live in the project's own database.
APP_ID_ENV: Final = "APP_ID"
REQUIRE_PROJECT_SCOPED_DB_ENV: Final = "REQUIRE_PROJECT_SCOPED_DB"

# Drain settings (L-06); the RUNNER_ prefix already makes them platform variables.
DRAIN_MAX_DEADLINE_MS_ENV: Final = "RUNNER_DRAIN_MAX_DEADLINE_MS"
DRAIN_RECORD_TTL_S_ENV: Final = "RUNNER_DRAIN_RECORD_TTL_S"
# The pod's own IP (downward API status.podIP): the AER and the Tool Pod report `http://<it>:<port>` with
# every answer, so the OE drains and interrupts that pod directly, not through the Service (Decision 8).
POD_IP_ENV: Final = "RUNNER_POD_IP"

# LLM credentials are platform-owned (Decision 9): the operator lists the env names it routed from
# spec.llm.credentials here (comma-separated), and the well-known key names are never a tenant's either.
LLM_CREDENTIAL_NAMES_ENV: Final = "AGENTIC_LLM_CREDENTIAL_NAMES"
WELL_KNOWN_LLM_KEY_NAMES: Final = frozenset(
    {
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "VOYAGE_API_KEY",
        "GOOGLE_API_KEY",
        "GEMINI_API_KEY",
        "MISTRAL_API_KEY",
        "COHERE_API_KEY",
        "GROQ_API_KEY",
        "AZURE_OPENAI_API_KEY",
    }
)

# Unauthenticated probe and scrape routes; every other route needs the bearer token.
HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"
METRICS_PATH: Final = "/metrics"
UNAUTHENTICATED_PATHS: Final = frozenset({HEALTH_PATH, READY_PATH, METRICS_PATH})

# Pod filesystem and identity.
TMP_DIR: Final = "/tmp"  # noqa: S108 - an emptyDir in the pod; the root filesystem is read-only
RUNTIME_UID: Final = 10001

# Platform environment: never a tenant secret in the Tool Pod. Everything else there is one.
PLATFORM_ENV_PREFIXES: Final = ("AGENTIC_", "AGENT_", "RUNTIME_", "RUNNER_", "KUBERNETES_", "PYTHON", "LC_")
PLATFORM_ENV_NAMES: Final = frozenset(
    {
        "PATH",
        "HOME",
        "HOSTNAME",
        "LANG",
        "TERM",
        "PWD",
        "SHLVL",
        APP_HOST_ENV,
        STRUCTURED_LOGGING_ENV,
        APP_ID_ENV,
        REQUIRE_PROJECT_SCOPED_DB_ENV,
    }
)
# Kubernetes service-link variables (FOO_SERVICE_HOST, FOO_SERVICE_PORT_HTTP, FOO_PORT_80_TCP_ADDR, ...).
# Rendered pods set enableServiceLinks: false, so only these unmistakable shapes are matched: a tenant secret
# such as DB_PORT or STRIPE_PORTAL_KEY must still reach its connector.
PLATFORM_ENV_GLOBS: Final = (
    "*_SERVICE_HOST",
    "*_SERVICE_PORT",
    "*_SERVICE_PORT_*",
    "*_PORT_[0-9]*_TCP*",
    "*_PORT_[0-9]*_UDP*",
    "*_PORT_[0-9]*_SCTP*",
)


def is_platform_env(name: str) -> bool:
    """True for a variable the platform sets; such a variable is never handed to connectors as a secret."""
    if name in PLATFORM_ENV_NAMES or name.startswith(PLATFORM_ENV_PREFIXES):
        return True
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in PLATFORM_ENV_GLOBS)


def tenant_secret_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The Tool Pod's tenant secrets: its process environment minus platform variables."""
    return {name: value for name, value in environ.items() if not is_platform_env(name)}


def llm_credential_names(environ: Mapping[str, str]) -> frozenset[str]:
    """Env names that carry LLM credentials: the operator's list plus the well-known key names."""
    listed = environ.get(LLM_CREDENTIAL_NAMES_ENV, "")
    return WELL_KNOWN_LLM_KEY_NAMES | {name.strip() for name in listed.split(",") if name.strip()}


def tenant_env_vars(environ: Mapping[str, str]) -> dict[str, str]:
    """What `${VAR}` in agent.yaml may name: the tenant's secrets minus every LLM credential."""
    llm = llm_credential_names(environ)
    return {name: value for name, value in tenant_secret_env(environ).items() if name not in llm}
