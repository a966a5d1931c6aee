"""Connector core: OpenAPI 3.0 -> tool definitions -> bundle -> HTTP execution."""

from agent_runtime.connectors.bundle import BUNDLE_INDEX, Bundle, build_bundle, read_bundle, write_bundle
from agent_runtime.connectors.classify import ToolApiError, classify_tool_api_error
from agent_runtime.connectors.compile import compile_catalog, load_catalog_text
from agent_runtime.connectors.definitions import (
    FORMAT_VERSION,
    AuthSpec,
    BodySpec,
    ParamSpec,
    SourceSpec,
    ToolDefinitions,
    ToolSpec,
    load_tool_defs,
)
from agent_runtime.connectors.errors import (
    ConnectorError,
    CredentialMissingError,
    ToolArgumentError,
    UnknownToolError,
)
from agent_runtime.connectors.executor import ConnectorExecutor, ToolResponse
from agent_runtime.connectors.regenerate import CatalogChanges, regenerate_catalog
from agent_runtime.connectors.resolve import (
    AGENT_CONFIG_ENV,
    BUNDLE_PATH_ENV,
    RuntimeBundle,
    bundle_from_agent_config,
    resolve_runtime_bundle,
)
from agent_runtime.connectors.toolyaml import (
    ToolYaml,
    load_tool_yaml,
    materialize_connector,
    scaffold_tool_yaml,
)

__all__ = [
    "AGENT_CONFIG_ENV",
    "BUNDLE_INDEX",
    "BUNDLE_PATH_ENV",
    "FORMAT_VERSION",
    "AuthSpec",
    "BodySpec",
    "Bundle",
    "CatalogChanges",
    "ConnectorError",
    "ConnectorExecutor",
    "CredentialMissingError",
    "ParamSpec",
    "RuntimeBundle",
    "SourceSpec",
    "ToolApiError",
    "ToolArgumentError",
    "ToolDefinitions",
    "ToolResponse",
    "ToolSpec",
    "ToolYaml",
    "UnknownToolError",
    "build_bundle",
    "bundle_from_agent_config",
    "classify_tool_api_error",
    "compile_catalog",
    "load_catalog_text",
    "load_tool_defs",
    "load_tool_yaml",
    "materialize_connector",
    "read_bundle",
    "regenerate_catalog",
    "resolve_runtime_bundle",
    "scaffold_tool_yaml",
    "write_bundle",
]
