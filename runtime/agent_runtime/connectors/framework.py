"""The built-in connector framework (C-01 to C-03): the protocol, a base class, and the bundle format.

A built-in connector is a class with `type`, `config_schema`, `validate_config`, `test_connection`,
`list_tools` and `async execute`. Its configuration (never a secret) travels in the bundle; each secret it
needs is named by an environment variable (`credentials: {field: ENV}`) that only the Tool Pod receives
(Decision 15). Every tool says whether it is `sensitive`; every write tool is.

Failures a model can act on are `BuiltinToolError(category, explanation)`: the explanation never holds a
credential (the Tool Pod also redacts every secret value it knows before anything leaves it).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_runtime.connectors.documents import check_json_value, parse_document_text
from agent_runtime.connectors.errors import ConnectorError, CredentialMissingError, ToolArgumentError
from agent_runtime.connectors.naming import check_connector_name

BUILTIN_FORMAT_VERSION = 1
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CANONICAL_TOOL = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")
# An MCP server's tools keep the server's own name behind a per-server prefix (Decision 18).
MCP_TOOL = re.compile(r"^mcp\.[0-9a-f]{8}\.[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")

# Categories of a built-in tool's failure, beside the connector core's HTTP ones (auth, forbidden,
# not_found, rate_limited, timeout, connection, client_error, server_error).
INVALID_ARGUMENTS = "invalid_arguments"
QUERY_REFUSED = "query_refused"  # the SQL guard refused the statement before it reached the database
READ_ONLY_VIOLATION = "read_only_violation"  # the database itself refused a write inside a read
QUERY_ERROR = "query_error"  # the database refused the statement (syntax, unknown table, ...)
CREDENTIAL_MISSING = "credential_missing"


class ConnectorConfigError(ConnectorError):
    """A connector config that does not fit its type's schema; `field` names where (`config.port`)."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class BuiltinToolError(Exception):
    """A classified, credential-free failure of one built-in tool call, which the model may act on."""

    def __init__(
        self,
        category: str,
        explanation: str,
        *,
        status_code: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(explanation)
        self.category = category
        self.explanation = explanation
        self.status_code = status_code
        self.retry_after_s = retry_after_s


class ToolSchema(BaseModel):
    """One tool as the protocol lists it: `{name, description, inputSchema, sensitive}`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    name: str
    description: str
    input_schema: dict[str, Any] = Field(alias="inputSchema")
    sensitive: bool

    @field_validator("name")
    @classmethod
    def _canonical(cls, value: str) -> str:
        if not CANONICAL_TOOL.match(value) and not MCP_TOOL.match(value):
            raise ValueError("a built-in tool is named <area>.<tool> in lower case, e.g. slack.post_message")
        return value

    @field_validator("input_schema")
    @classmethod
    def _json(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_json_value(value, where="inputSchema")
        return value


class TestResult(BaseModel):
    """What `test_connection` found: `ok`, a credential-free `detail`, and tools it discovered."""

    __test__ = False  # not a pytest class

    ok: bool
    detail: str = ""
    discovered_tools: list[str] | None = None


@runtime_checkable
class Connector(Protocol):
    """The C-01 protocol; `BuiltinConnector` is the base every built-in type uses."""

    type: ClassVar[str]
    config_schema: ClassVar[dict[str, Any]]

    def validate_config(self, config: Mapping[str, Any]) -> None: ...

    async def test_connection(self) -> TestResult: ...

    def list_tools(self) -> list[ToolSchema]: ...

    async def execute(self, tool: str, arguments: Mapping[str, Any], *, env: Mapping[str, str]) -> Any: ...


class BuiltinConnector:
    """Base class: config checked against `config_schema`, secrets read from env by credential field.

    Subclasses set `type`, `config_schema`, `secrets` ({field: description}; `required_secrets` must be
    given) and `tools`, and implement `_call(tool, arguments, env)`.
    """

    type: ClassVar[str] = ""
    description: ClassVar[str] = ""
    config_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    secrets: ClassVar[dict[str, str]] = {}
    required_secrets: ClassVar[frozenset[str]] = frozenset()
    tools: ClassVar[tuple[ToolSchema, ...]] = ()

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        name: str | None = None,
        credentials: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.validate_config(config)
        self.config: dict[str, Any] = apply_defaults(self.config_schema, dict(config))
        self.name = name or self.type
        self.credentials = dict(credentials or {})
        self._env: Mapping[str, str] = env or {}
        check_credentials(type(self), self.credentials)

    def validate_config(self, config: Mapping[str, Any]) -> None:
        """Raise ConnectorConfigError naming the first field that does not fit `config_schema`."""
        validate_value(self.config_schema, config, where="config", error=ConnectorConfigError)

    async def test_connection(self, *, env: Mapping[str, str] | None = None) -> TestResult:
        """Reach the provider with the configured credential; never raises for an unreachable one."""
        return TestResult(ok=True, detail="nothing to test")

    def list_tools(self) -> list[ToolSchema]:
        return [tool.model_copy(deep=True) for tool in self.tools if self.offers(tool.name)]

    def offers(self, tool: str) -> bool:
        """Whether this configuration offers `tool` (some tools need optional config)."""
        return True

    async def execute(self, tool: str, arguments: Mapping[str, Any], *, env: Mapping[str, str]) -> Any:
        """Validate the arguments against the tool's schema, then run it."""
        spec = next((t for t in self.tools if t.name == tool and self.offers(t.name)), None)
        if spec is None:
            raise BuiltinToolError(INVALID_ARGUMENTS, f"connector type {self.type} has no tool {tool!r}")
        validate_value(spec.input_schema, arguments, where="arguments", error=ToolArgumentError)
        return await self._call(tool, apply_defaults(spec.input_schema, dict(arguments)), env)

    async def _call(self, tool: str, arguments: dict[str, Any], env: Mapping[str, str]) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release pooled connections (the Tool Pod calls it at shutdown)."""

    def secret(self, field: str, env: Mapping[str, str], *, required: bool = True) -> str | None:
        """The secret for `field` from the Tool Pod's environment, by the env name the bundle gives."""
        env_name = self.credentials.get(field)
        value = (env.get(env_name) or self._env.get(env_name) or "") if env_name else ""
        if not value:
            if not required:
                return None
            where = f"environment variable {env_name}" if env_name else "no credential is configured"
            raise CredentialMissingError(
                f"connector {self.name!r} needs its {field} secret but {where} is unset or empty; provide "
                "the Connector's credential Secret"
            )
        return value

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """`{type, description, config_schema, secrets, tools}` for GET /connector-types (C-02)."""
        return {
            "type": cls.type,
            "description": cls.description,
            "config_schema": json.loads(json.dumps(cls.config_schema)),
            "secrets": [
                {"field": f, "description": d, "required": f in cls.required_secrets}
                for f, d in cls.secrets.items()
            ],
            "tools": [t.model_dump(mode="json", by_alias=True) for t in cls.tools],
        }

    @classmethod
    def egress(cls, config: Mapping[str, Any]) -> list[tuple[str, int]]:
        """(host, port) pairs the Tool Pod must reach for this config (for its NetworkPolicy)."""
        return []


def check_credentials(cls: type[BuiltinConnector], credentials: Mapping[str, str]) -> None:
    """Every credential field is known, names an env variable, and every required one is given."""
    for field_name, env_name in credentials.items():
        if field_name not in cls.secrets:
            known = ", ".join(sorted(cls.secrets)) or "none"
            raise ConnectorConfigError(
                f"credentials.{field_name}", f"connector type {cls.type} has no such secret (known: {known})"
            )
        if not isinstance(env_name, str) or not ENV_NAME.match(env_name):
            raise ConnectorConfigError(
                f"credentials.{field_name}",
                "must name an environment variable (letters, digits, underscore); never the secret itself",
            )
    for field_name in sorted(cls.required_secrets):
        if field_name not in credentials:
            raise ConnectorConfigError(
                f"credentials.{field_name}",
                f"connector type {cls.type} needs this secret; map it to the env variable holding it",
            )


class BuiltinToolSpec(ToolSchema):
    """A tool of a materialized built-in connector, as the bundle carries it. An MCP tool may add the
    server's `title` (display name), `outputSchema` and `_meta`, bounded (`connectors/mcp/catalog.py`)."""

    # Left out when absent, so every bundle file without them keeps its bytes and digest.
    title: str | None = Field(default=None, exclude_if=lambda v: v is None)
    output_schema: dict[str, Any] | None = Field(
        default=None, alias="outputSchema", exclude_if=lambda v: v is None
    )
    meta: dict[str, Any] | None = Field(default=None, alias="_meta", exclude_if=lambda v: v is None)

    @field_validator("output_schema", "meta")
    @classmethod
    def _plain_json(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            check_json_value(value, where="outputSchema/_meta")
        return value


class BuiltinConnectorDefs(BaseModel):
    """A materialized built-in connector: the bundle file (no secret value, only env names)."""

    model_config = ConfigDict(extra="forbid")

    format_version: Literal[1] = BUILTIN_FORMAT_VERSION
    kind: Literal["builtin"] = "builtin"
    name: str
    type: str
    config: dict[str, Any] = Field(default_factory=dict)
    credentials: dict[str, str] = Field(default_factory=dict)
    tools: list[BuiltinToolSpec] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _connector_name(cls, value: str) -> str:
        check_connector_name(value)
        return value

    def tool_schemas(self) -> list[dict[str, Any]]:
        """Detached `{name, description, inputSchema}` dicts, as the OpenAPI catalogs give them, with the
        `title` a person is shown when the tool has one (a model's tool list ignores it)."""
        return [
            {
                "name": t.name,
                "description": t.description,
                "inputSchema": json.loads(json.dumps(t.input_schema)),
                **({"title": t.title} if t.title is not None else {}),
            }
            for t in self.tools
        ]

    def to_data(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def dumps(self) -> str:
        """Canonical text: deterministic JSON (also YAML), like the OpenAPI connectors' files."""
        return (
            json.dumps(self.to_data(), indent=1, ensure_ascii=False, allow_nan=False, sort_keys=True) + "\n"
        )

    @classmethod
    def loads(cls, text: str, *, where: str = "built-in connector") -> BuiltinConnectorDefs:
        data = parse_document_text(text, field=where)
        if not isinstance(data, dict) or data.get("kind") != "builtin":
            raise ConnectorError(f"{where}: expected a built-in connector (kind: builtin)")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            error = exc.errors()[0]
            location = ".".join(str(p) for p in error["loc"]) or "(top level)"
            raise ConnectorError(f"{where}: field {location}: {error['msg']}") from None


def is_builtin_text(text: str) -> bool:
    """Whether a bundle file holds a built-in connector (cheap: the canonical JSON has the key)."""
    return '"kind": "builtin"' in text


# A small JSON Schema validator: the subset our own config and tool schemas use. ------------------------

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list, tuple),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def validate_value(
    schema: Mapping[str, Any], value: Any, *, where: str, error: type[ValueError] = ToolArgumentError
) -> None:
    """Raise `error` naming the first place `value` does not fit `schema` (no value is ever quoted)."""
    problem = _problem(schema, value, where)
    if problem is not None:
        path, text = problem
        if error is ConnectorConfigError:
            raise ConnectorConfigError(path, text)
        raise error(f"{path}: {text}")


def _problem(schema: Mapping[str, Any], value: Any, where: str) -> tuple[str, str] | None:
    for key in ("anyOf", "oneOf"):
        if key in schema and not any(_problem(option, value, where) is None for option in schema[key]):
            return where, "matches none of the allowed forms"
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_is_type(value, name) for name in names):
            return where, f"must be {' or '.join(names)}"
    if "enum" in schema and value not in schema["enum"]:
        return where, f"must be one of {', '.join(json.dumps(v) for v in schema['enum'])}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return where, f"must be at least {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return where, f"must be at most {schema['maxLength']} characters"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return where, f"must match {schema['pattern']}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            return where, "must be a finite number"
        if "minimum" in schema and value < schema["minimum"]:
            return where, f"must be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return where, f"must be at most {schema['maximum']}"
    if isinstance(value, list | tuple):
        if len(value) < schema.get("minItems", 0):
            return where, f"must hold at least {schema['minItems']} items"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return where, f"must hold at most {schema['maxItems']} items"
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                found = _problem(items, item, f"{where}[{index}]")
                if found:
                    return found
    if isinstance(value, Mapping):
        properties: Mapping[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                return f"{where}.{name}", "is required"
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                found = _problem(properties[name], item, f"{where}.{name}")
                if found:
                    return found
            elif extra is False:
                known = ", ".join(sorted(properties)) or "none"
                return f"{where}.{name}", f"is not a known field (known: {known})"
            elif isinstance(extra, Mapping):
                found = _problem(extra, item, f"{where}.{name}")
                if found:
                    return found
    return None


def _is_type(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, (object,)))


def apply_defaults(schema: Mapping[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    """Top-level `default`s filled in (a new dict)."""
    out = dict(value)
    for name, prop in schema.get("properties", {}).items():
        if name not in out and isinstance(prop, Mapping) and "default" in prop:
            out[name] = json.loads(json.dumps(prop["default"]))
    return out


def tool(
    name: str,
    description: str,
    *,
    properties: Mapping[str, Any],
    required: Sequence[str] = (),
    sensitive: bool,
) -> ToolSchema:
    """A tool schema with a closed object input (unknown arguments are refused)."""
    return ToolSchema(
        name=name,
        description=description,
        inputSchema={
            "type": "object",
            "properties": dict(properties),
            "required": list(required),
            "additionalProperties": False,
        },
        sensitive=sensitive,
    )
