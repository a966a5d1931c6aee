"""The compiled tool-definition format (`tool_defs.yaml`): versioned, loaded and written here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agent_runtime.connectors.documents import check_json_value, parse_document_text, read_local_text
from agent_runtime.connectors.errors import ConnectorError
from agent_runtime.connectors.naming import check_connector_name

FORMAT_VERSION = 1
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
JSON_MEDIA = "application/json"
FORM_MEDIA = "application/x-www-form-urlencoded"
# application/json and every structured-syntax +json type (merge-patch+json, vnd.api+json...), with params.
JSON_LIKE_MEDIA = re.compile(r"^application/([\w.-]+\+)?json\s*(;.*)?$", re.IGNORECASE)
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
    # api_key only: text sent before the credential, e.g. "Bearer " for an apiKey scheme on Authorization.
    prefix: str | None = None
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

    @field_validator("prefix")
    @classmethod
    def _header_safe(cls, value: str | None) -> str | None:
        check_prefix(value)
        return value


def check_prefix(value: str | None) -> None:
    """An auth prefix goes on the wire before the credential: printable text on one line."""
    if value is not None and (len(value) > 64 or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)):
        raise ValueError('must be at most 64 printable characters on one line, e.g. "Bearer "')


class TlsSpec(_Model):
    """Which CA certificates verify the provider: exactly these, nothing from the process environment.

    `ca_file` is an absolute path on the machine that executes calls; `ca_env` names an environment
    variable holding PEM text. Neither is a secret, but both are read where the calls run, not here.
    """

    ca_file: str | None = None
    ca_env: str | None = None

    @field_validator("ca_file")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and ("://" in value or not value.startswith("/")):
            raise ValueError(
                f"{value[:80]!r} must be an absolute path on the machine that executes the calls, e.g. "
                "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt (no URL, nothing relative)"
            )
        return value

    @field_validator("ca_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME.match(value):
            raise ValueError(
                "must name an environment variable (letters, digits, underscore) holding the PEM CA "
                "certificate(s), e.g. INTERNAL_API_CA"
            )
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> TlsSpec:
        if (self.ca_file is None) == (self.ca_env is None):
            raise ValueError(
                "set exactly one of ca_file (a PEM file path) or ca_env (a variable holding PEM text)"
            )
        return self


class ParamSpec(_Model):
    """One parameter: `arg` is its property in the input schema, `name` its name on the wire."""

    name: str
    arg: str
    location: ParamLocation = Field(alias="in")
    style: str = "form"
    explode: bool = True
    required: bool = False
    # A path parameter that may carry slashes (a file path, a git ref, `{base}...{head}`): sent segment by
    # segment, each encoded. None (the default, left out of the catalog) keeps `/` encoded as %2F.
    multi_segment: bool | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class BodySpec(_Model):
    """The request body: mapped property by property, or wrapped whole under `arg`."""

    media_type: str  # sent as Content-Type: form-urlencoded, or JSON under a JSON-like type
    arg: str | None = None
    properties: list[str] = Field(default_factory=list)
    required: bool = False
    # form encoding per property: {"metadata": {"style": "deepObject", "explode": true}}
    encoding: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("media_type")
    @classmethod
    def _encodable(cls, value: str) -> str:
        if value != FORM_MEDIA and not JSON_LIKE_MEDIA.match(value):
            raise ValueError(
                f"{value[:80]!r} is neither JSON (application/json, application/*+json) nor "
                f"{FORM_MEDIA}; recompile the catalog with compile_catalog"
            )
        return value

    @property
    def is_form(self) -> bool:
        return self.media_type == FORM_MEDIA


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
    tls: TlsSpec | None = None
    # tool.yaml's default headers (an API version header...): never a secret (connectors/default_headers.py).
    headers: dict[str, str] | None = None
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
