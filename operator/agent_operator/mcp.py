"""A Connector of type `mcp` as a bundle file, pure: its tools are those its last good discovery recorded.

Discovery (discovery.py) writes what the server listed into the Connector's status (`status.discovery`:
count, names, digest, when, and the catalog itself), so the bundle is built from the Connector alone, the
same at every reconcile and after a restart, and a server that is down keeps its last good list in
service. `id8`, the tools' prefix, comes from the Connector's UID.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from agent_operator.inputs import InputProblem
from agent_operator.models import Connector
from agent_runtime.connectors.framework import BuiltinConnectorDefs, ConnectorConfigError
from agent_runtime.connectors.mcp.catalog import MCP_TYPE, DiscoveredTool, materialize_mcp, server_id
from agent_runtime.contract import is_platform_env

BUNDLE = "BundleReady"  # bundle.BUNDLE, which imports this module
DISCOVERED = "Discovered"
DISCOVERY_KEY = "discovery"
# A user sets (or changes) this annotation to ask for a discovery now: `kubectl annotate connector NAME
# agentengine.io/rediscover="$(date +%s)" --overwrite`.
REDISCOVER_ANNOTATION = "agentengine.io/rediscover"


def is_mcp(connector: Connector) -> bool:
    return connector.spec.source.type == MCP_TYPE


def oauth_connectors(definitions: Sequence[object]) -> list[str]:
    """The names of the bundle's MCP connectors that authorize with OAuth (`config.auth`): the Tool Pod
    gets a writable token directory and, read-only, each one's `mcp-oauth-<name>` Secret as its seed."""
    return sorted(
        d.name
        for d in definitions
        if isinstance(d, BuiltinConnectorDefs)
        and d.type == MCP_TYPE
        and isinstance(d.config.get("auth"), Mapping)
    )


def recorded(status: Mapping[str, Any]) -> dict[str, Any] | None:
    """The discovery a Connector's status records, or None."""
    found = status.get(DISCOVERY_KEY)
    return dict(found) if isinstance(found, Mapping) and isinstance(found.get("catalog"), list) else None


def recorded_tools(status: Mapping[str, Any]) -> list[DiscoveredTool] | None:
    record = recorded(status)
    if record is None:
        return None
    try:
        return [DiscoveredTool.model_validate(item) for item in record["catalog"]]
    except ValidationError:
        return None  # a status edited by hand: discovery writes it again


def materialize_mcp_connector(connector: Connector) -> BuiltinConnectorDefs:
    """The bundle file from `spec.config`, `spec.credentials` and the recorded discovery, or InputProblem."""
    name = connector.meta.name
    spec = connector.spec
    for index, credential in enumerate(spec.credentials):
        if is_platform_env(credential.env):
            raise InputProblem(
                reason="AuthEnvReserved",
                condition=BUNDLE,
                message=f"Connector {name}: spec.credentials[{index}].env {credential.env!r} is a platform "
                f"variable name; choose another, e.g. {name.upper().replace('-', '_')}_TOKEN",
            )
    tools = recorded_tools(connector.status)
    if tools is None:
        condition = next(
            (c for c in connector.status.get("conditions") or [] if c.get("type") == DISCOVERED), {}
        )
        why = (
            f" ({condition['message']})"
            if condition.get("status") == "False" and condition.get("message")
            else ""
        )
        raise InputProblem(
            reason="ToolsNotDiscovered",
            condition=BUNDLE,
            message=f"Connector {name}: the tools of its MCP server are not discovered yet{why}; the "
            "operator discovers them when it reconciles the Connector (see its Discovered condition)",
        )
    try:
        return materialize_mcp(
            name=name,
            id8=server_id(connector.meta.uid),
            config=spec.config,
            credentials={c.field: c.env for c in spec.credentials},
            tools=tools,
            allow=spec.expose.allow,
        )
    except ConnectorConfigError as exc:
        reason = "ExposeAllowUnknown" if exc.field == "expose.allow" else "ConfigInvalid"
        where = exc.field if exc.field.startswith("metadata.") else f"spec.{exc.field}"
        raise InputProblem(
            reason=reason, condition=BUNDLE, message=f"Connector {name}: {where}: {exc.problem}"
        ) from None
