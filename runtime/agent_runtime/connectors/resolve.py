"""Which connectors this process runs with: a pre-materialized bundle, agent.yaml, or none."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from agent_runtime.connectors.agent_yaml import AgentConnectors, ConnectorEntry, read_agent_config
from agent_runtime.connectors.builtin.registry import materialize_builtin
from agent_runtime.connectors.bundle import Bundle, build_bundle, contained_path, read_full_bundle
from agent_runtime.connectors.compile import load_catalog_text
from agent_runtime.connectors.definitions import ToolDefinitions
from agent_runtime.connectors.documents import read_local_text, refuse_url
from agent_runtime.connectors.errors import ConnectorError
from agent_runtime.connectors.framework import BuiltinConnectorDefs, ConnectorConfigError
from agent_runtime.connectors.toolyaml import ToolYaml, materialize_connector

BUNDLE_PATH_ENV = "AGENTIC_CONNECTOR_BUNDLE_PATH"
BUNDLE_DIGEST_ENV = "AGENTIC_CONNECTOR_BUNDLE_DIGEST"
AGENT_CONFIG_ENV = "AGENT_CONFIG_PATH"
_EMPTY_DIGEST = build_bundle([]).digest


@dataclass(frozen=True)
class RuntimeBundle:
    connectors: list[ToolDefinitions] = field(default_factory=list)
    digest: str = _EMPTY_DIGEST
    source: Literal["bundle", "agent_config", "none"] = "none"
    builtins: list[BuiltinConnectorDefs] = field(default_factory=list)

    @property
    def tool_count(self) -> int:
        return sum(len(c.tools) for c in self.connectors) + sum(len(c.tools) for c in self.builtins)


def resolve_runtime_bundle(
    *, env: Mapping[str, str] | None = None, agent_config: Path | None = None
) -> RuntimeBundle:
    """Bundle index from AGENTIC_CONNECTOR_BUNDLE_PATH (checked against AGENTIC_CONNECTOR_BUNDLE_DIGEST
    when set); else agent.yaml's connectors; else nothing."""
    environ = os.environ if env is None else env
    bundle_path = environ.get(BUNDLE_PATH_ENV, "").strip()
    if bundle_path:
        refuse_url(bundle_path, field=BUNDLE_PATH_ENV)
        connectors, builtins, digest = read_full_bundle(bundle_path)
        expected = environ.get(BUNDLE_DIGEST_ENV, "").strip()
        if expected and expected != digest:
            raise ConnectorError(
                f"{BUNDLE_PATH_ENV}: the bundle's digest {digest[:12]} is not the {expected[:12]} that "
                f"{BUNDLE_DIGEST_ENV} names; the mounted bundle was replaced after it was rendered: "
                "refusing to start"
            )
        return RuntimeBundle(connectors=connectors, digest=digest, source="bundle", builtins=builtins)
    config = agent_config or (
        Path(environ[AGENT_CONFIG_ENV]) if environ.get(AGENT_CONFIG_ENV, "").strip() else None
    )
    if config is None:
        return RuntimeBundle()
    bundle = bundle_from_agent_config(config, env=environ)
    return RuntimeBundle(
        connectors=bundle.connectors, digest=bundle.digest, source="agent_config", builtins=bundle.builtins
    )


def bundle_from_agent_config(agent_config: str | Path, *, env: Mapping[str, str] | None = None) -> Bundle:
    """agent.yaml -> its connectors materialized -> the bundle (what the operator writes, byte for byte).

    `mcp.servers` entries are discovered with `env` (default the process environment): their URLs take
    `${VAR}` from its tenant variables and their tokens come from it."""
    config_file = Path(agent_config)
    data = read_agent_config(config_file)
    try:
        parsed = AgentConnectors.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        location = ".".join(str(p) for p in error["loc"])
        raise ConnectorError(
            f"{config_file.name}: field {location}: {error['msg']} (expected 'version: 1' and "
            "'connectors: [- source: connectors/NAME/tool.yaml]')"
        ) from None
    workspace = Path(os.path.realpath(config_file.parent))
    materialized = []
    builtins: list[BuiltinConnectorDefs] = []
    for index, entry in enumerate(parsed.connectors):
        if entry.type is not None:
            builtins.append(_builtin_entry(entry, where=f"{config_file.name} connectors[{index}]"))
            continue
        assert entry.source is not None  # the model allows only one kind
        field_name = f"{config_file.name} connectors[{index}].source"
        refuse_url(entry.source, field=field_name)
        tool_file = contained_path(workspace, entry.source, field=field_name)
        tool = ToolYaml.loads(read_local_text(tool_file, field=field_name), where=entry.source)
        catalog_relative = os.path.relpath(tool_file.parent / tool.tool_defs, workspace)
        catalog_file = contained_path(workspace, catalog_relative, field=f"{entry.source} tool_defs")
        catalog = load_catalog_text(
            read_local_text(catalog_file, field=f"{entry.source} tool_defs"), connector_name=tool.name
        )
        materialized.append(materialize_connector(tool, catalog))
    mcp = data.get("mcp")
    if isinstance(mcp, dict) and mcp.get("servers"):
        # Imported here, only when agent.yaml names MCP servers: their discovery (the MCP client, agent.yaml
        # interpolation) is not the connector core's and most bundles never need it.
        from agent_runtime.mcp_servers import mcp_server_connectors

        builtins += mcp_server_connectors(config_file, env=os.environ if env is None else env)
    return build_bundle(materialized, builtins)


def _builtin_entry(entry: ConnectorEntry, *, where: str) -> BuiltinConnectorDefs:
    try:
        return materialize_builtin(
            name=entry.name or "",
            type_name=entry.type or "",
            config=entry.config,
            credentials=entry.credentials,
            allow=(entry.expose or {}).get("allow"),
        )
    except ConnectorConfigError as exc:
        raise ConnectorError(f"{where}: field {exc.field}: {exc.problem}") from None
