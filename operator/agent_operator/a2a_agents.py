"""A Connector of type `agent` (issue 38): a remote A2A agent whose card's skills are its tools.

Like an `mcp` Connector, its tools are discovered at reconcile time (discovery.py fetches the card with
the `token` credential) and recorded in `status.discovery` (`catalog`: the card's skills), so the bundle is
built from the Connector alone and a card that is down keeps the last good list. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_operator.inputs import InputProblem
from agent_operator.mcp import BUNDLE, DISCOVERED, recorded
from agent_operator.models import Connector
from agent_runtime.connectors.builtin.agent import AGENT_TYPE, materialize_agent
from agent_runtime.connectors.framework import BuiltinConnectorDefs, ConnectorConfigError
from agent_runtime.contract import is_platform_env


def is_a2a_agent(connector: Connector) -> bool:
    return connector.spec.source.type == AGENT_TYPE


def is_a2a_agent_body(body: Mapping[str, Any]) -> bool:
    return ((body.get("spec") or {}).get("source") or {}).get("type") == AGENT_TYPE


def materialize_agent_connector(connector: Connector) -> BuiltinConnectorDefs:
    """The bundle file from `spec.config`, `spec.credentials` and the recorded card, or InputProblem."""
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
    record = recorded(connector.status)
    if record is None:
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
            message=f"Connector {name}: the skills of its A2A agent card are not discovered yet{why}; the "
            "operator fetches the card when it reconciles the Connector (see its Discovered condition)",
        )
    try:
        return materialize_agent(
            name=name,
            config=spec.config,
            credentials={c.field: c.env for c in spec.credentials},
            card={"skills": record["catalog"]},
            allow=spec.expose.allow,
        )
    except ConnectorConfigError as exc:
        reason = "ExposeAllowUnknown" if exc.field == "expose.allow" else "ConfigInvalid"
        raise InputProblem(
            reason=reason, condition=BUNDLE, message=f"Connector {name}: spec.{exc.field}: {exc.problem}"
        ) from None
