"""The compiled tool-definition format (`tool_defs.yaml`): versioned, loaded and written here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_runtime.connectors.documents import check_json_value, parse_document_text, read_local_text
from agent_runtime.connectors.errors import ConnectorError
from agent_runtime.connectors.naming import check_connector_name

FORMAT_VERSION = 1
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ParamLocation = Literal["path", "query", "header", "cookie"]
AuthType = Literal["bearer", "basic", "api_key", "path"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, populate_by_name=True)


class SourceSpec(_Model):
    type: Literal["openapi"] = "openapi"
    base_url: str | None = None


class AuthSpec(_Model):
    """How the credential is presented; `env` names the variable holding it (never the value)."""

    type: AuthType
    env: str | None = None
    # api_key: where and under which name; path: the path parameter that carries the credential.
    location: Literal["header", "query", "cookie", "path"] | None = Field(default=None, alias="in")
    name: str | None = None
    scheme_name: str | None = None  # the securitySchemes entry it came from

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    @field_validator("env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME.match(value):
            raise ValueError(
                "must name an environment variable (letters, digits, underscore), e.g. JIRA_TOKEN; "
                "a secret value never belongs here"
            )
        return value


class ParamSpec(_Model):
    """One parameter: `arg` is its property in the input schema, `name` its name on the wire."""

    name: str
    arg: str
    location: ParamLocation = Field(alias="in")
    style: str = "form"
    explode: bool = True
    required: bool = False

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class BodySpec(_Model):
    """The request body: mapped property by property, or wrapped whole under `arg`."""

    media_type: Literal["application/json", "application/x-www-form-urlencoded"]
    arg: str | None = None
    properties: list[str] = Field(default_factory=list)
    required: bool = False
    # form encoding per property: {"metadata": {"style": "deepObject", "explode": true}}
    encoding: dict[str, dict[str, Any]] = Field(default_factory=dict)


class ToolSpec(_Model):
    name: str
    operation_id: str | None = None
    method: Literal["GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"]
    path: str
    description: str = ""
    params: list[ParamSpec] = Field(default_factory=list)
    body: BodySpec | None = None
    authenticated: bool = True
    input_schema: dict[str, Any] = Field(alias="inputSchema")

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    @field_validator("input_schema")
    @classmethod
    def _strict_json(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_json_value(value, where="inputSchema")
        return value


class SkippedOperation(_Model):
    method: str
    path: str
    operation_id: str | None = None
    reason: str


class Provenance(_Model):
    """Carried along for people and tooling; nothing enforces it."""

    document_sha256: str | None = None
    title: str | None = None
    version: str | None = None
    externalize: dict[str, Any] = Field(default_factory=dict)

    model_config = ConfigDict(extra="allow")


class ToolDefinitions(_Model):
    format_version: Literal[1] = FORMAT_VERSION
    name: str
    source: SourceSpec = Field(default_factory=SourceSpec)
    auth: AuthSpec | None = None
    auth_options: list[AuthSpec] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
    skipped: list[SkippedOperation] = Field(default_factory=list)
    provenance: Provenance = Field(default_factory=Provenance)

    @field_validator("name")
    @classmethod
    def _connector_name(cls, value: str) -> str:
        check_connector_name(value)  # it becomes a bundle file name: no path separators, no dots
        return value

    def tool(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """Detached {name, description, inputSchema} dicts: changing them changes nothing here."""
        return [
            {
                "name": t.name,
                "description": t.description,
                "inputSchema": json.loads(json.dumps(t.input_schema)),
            }
            for t in self.tools
        ]

    def to_data(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def dumps(self) -> str:
        """Canonical text: deterministic JSON, which is also YAML, so any YAML reader accepts it."""
        return json.dumps(self.to_data(), indent=1, ensure_ascii=False, allow_nan=False) + "\n"

    @classmethod
    def loads(cls, text: str, *, where: str = "tool definitions") -> ToolDefinitions:
        data = parse_document_text(text, field=where)
        return cls.from_data(data, where=where)

    @classmethod
    def from_data(cls, data: Any, *, where: str = "tool definitions") -> ToolDefinitions:
        if not isinstance(data, dict):
            raise ConnectorError(f"{where}: expected a mapping with format_version, name and tools")
        version = data.get("format_version")
        if version != FORMAT_VERSION:
            raise ConnectorError(
                f"{where}: format_version {version!r} is not supported "
                f"(this runtime reads {FORMAT_VERSION}); "
                "recompile the catalog with this version's compile_catalog"
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConnectorError(f"{where}: {_first_error(exc)}") from None
        except ConnectorError as exc:
            raise ConnectorError(f"{where}: {exc}") from None

    def write(self, path: str | Path) -> Path:
        target = Path(path)
        target.write_text(self.dumps(), encoding="utf-8")
        return target


def load_tool_defs(path: str | Path) -> ToolDefinitions:
    """Load a compiled catalog or materialized connector file."""
    text = read_local_text(path, field="tool_defs")
    return ToolDefinitions.loads(text, where=f"tool_defs {Path(path).name}")


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    location = ".".join(str(part) for part in error["loc"]) or "(top level)"
    return f"field {location}: {error['msg']}"
