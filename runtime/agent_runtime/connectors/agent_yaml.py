"""agent.yaml's connector part as the connector core reads it: the file's mapping and the `connectors` list.

Below `resolve` (which builds the bundle) and below `agent_config` (which adds `mcp.servers`), so neither
imports the other for the model they share (issue 42: no import cycle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_runtime.connectors.documents import parse_document_text, read_local_text


class ConnectorEntry(BaseModel):
    """`{source: path/to/tool.yaml}` (OpenAPI), or a built-in connector inline:
    `{name, type, config, credentials: {secret field: ENV}, expose: {allow: [...]}}`."""

    model_config = ConfigDict(extra="forbid")

    source: str | None = None
    name: str | None = None
    type: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    credentials: dict[str, str] = Field(default_factory=dict)
    expose: dict[str, list[str]] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ConnectorEntry:
        if (self.source is None) == (self.type is None):
            raise ValueError("give either source (an OpenAPI connector's tool.yaml) or type and name")
        if self.type is not None and not self.name:
            raise ValueError("a built-in connector needs a name")
        return self


class AgentConnectors(BaseModel):
    """The part of agent.yaml the connector core reads; other top-level keys belong to others."""

    model_config = ConfigDict(extra="ignore")

    version: Literal[1]
    connectors: list[ConnectorEntry] = []


def read_agent_config(agent_config: str | Path) -> dict[str, Any]:
    """agent.yaml's top-level mapping; anything else reads as empty, so validation then names `version`."""
    config_file = Path(agent_config)
    text = read_local_text(config_file, field="agent config (AGENT_CONFIG_PATH)")
    data = parse_document_text(text, field=config_file.name)
    return data if isinstance(data, dict) else {}
