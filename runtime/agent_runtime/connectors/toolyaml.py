"""`tool.yaml`: which operations of a catalog a connector exposes, where it sends them, which credential."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agent_runtime.connectors.default_headers import check_default_headers
from agent_runtime.connectors.definitions import (
    AuthSpec,
    AuthType,
    SourceSpec,
    TlsSpec,
    ToolDefinitions,
    ToolSpec,
    check_prefix,
)
from agent_runtime.connectors.documents import parse_document_text, read_local_text, refuse_url
from agent_runtime.connectors.errors import ConnectorError
from agent_runtime.connectors.naming import (
    check_connector_name,
    disambiguate,
    distinguish_hashed,
    tool_name,
)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BASE_URL = re.compile(r"^https?://[^\s/?#{}]+(/[^\s?#{}]*)?$")


class ToolSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["openapi"] = "openapi"
    base_url: str | None = None

    @field_validator("base_url")
    @classmethod
    def _absolute_http(cls, value: str | None) -> str | None:
        if value is not None and not _BASE_URL.match(value):
            raise ValueError(
                f"{value[:80]!r} is not an absolute http(s) URL without query; e.g. https://api.example.com/v2"
            )
        return value


class ToolExpose(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(default_factory=list)


class ToolAuth(BaseModel):
    """Names the environment variable holding the credential; the value itself never appears here."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    # `none`: calls go out anonymous on purpose (required for a document that declares no security scheme).
    type: AuthType | Literal["none"]
    env: str | None = None
    location: Literal["header", "query", "cookie", "path"] | None = Field(default=None, alias="in")
    name: str | None = None
    prefix: str | None = None  # api_key: sent before the credential, e.g. "Bearer " or "token "

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str | None) -> str | None:
        check_prefix(value)
        return value

    @model_validator(mode="after")
    def _prefix_for_api_key(self) -> ToolAuth:
        if self.prefix is not None and self.type != "api_key":
            raise ValueError(
                f"prefix applies to type api_key only (type {self.type} has a fixed form); "
                "remove it, or use type api_key with in and name"
            )
        return self

    @model_validator(mode="after")
    def _env_unless_none(self) -> ToolAuth:
        if self.type == "none":
            if self.env or self.location or self.name or self.prefix is not None:
                raise ValueError("type none sends no credential: remove env, in, name and prefix")
        elif not self.env:
            raise ValueError(
                f"env is required for type {self.type}: name the environment variable holding the "
                "credential, e.g. JIRA_TOKEN (or use type none for an API without authentication)"
            )
        return self

    @field_validator("env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError(
                "must name an environment variable (letters, digits, underscore), e.g. JIRA_TOKEN; "
                "never put the secret itself in tool.yaml"
            )
        return value


class ToolYaml(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    tool_defs: str = "tool_defs.yaml"
    source: ToolSource = Field(default_factory=ToolSource)
    expose: ToolExpose = Field(default_factory=ToolExpose)
    auth: ToolAuth | None = None
    tls: TlsSpec | None = None
    # Sent on every call (e.g. X-GitHub-Api-Version); never a secret (default_headers.py refuses one).
    headers: dict[str, Any] | None = None

    @field_validator("headers")
    @classmethod
    def _headers_not_secret(cls, value: dict[str, Any] | None, info: ValidationInfo) -> dict[str, str] | None:
        auth = info.data.get("auth")
        credential_header = auth.name if auth is not None and auth.location == "header" else None
        return check_default_headers(value, credential_header=credential_header)

    @model_validator(mode="after")
    def _tls_needs_https(self) -> ToolYaml:
        base_url = self.source.base_url
        if self.tls is not None and base_url is not None and not base_url.startswith("https://"):
            raise ValueError(
                f"tls is set but source.base_url {base_url[:80]!r} is not https; "
                "use the provider's https URL or remove tls"
            )
        return self

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        check_connector_name(value)
        return value

    @field_validator("tool_defs")
    @classmethod
    def _local(cls, value: str) -> str:
        refuse_url(value, field="tool_defs")
        return value

    def dumps(self) -> str:
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)

    def write(self, path: str | Path) -> Path:
        target = Path(path)
        target.write_text(self.dumps(), encoding="utf-8")
        return target

    @classmethod
    def loads(cls, text: str, *, where: str = "tool.yaml") -> ToolYaml:
        data = parse_document_text(text, field=where)
        if not isinstance(data, dict):
            raise ConnectorError(f"{where}: expected a mapping with name, tool_defs, source, expose, auth")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            error = exc.errors()[0]
            location = ".".join(str(p) for p in error["loc"]) or "(top level)"
            message = str(error.get("ctx", {}).get("error", error["msg"]))
            raise ConnectorError(f"{where}: field {location}: {message}") from None


def load_tool_yaml(path: str | Path) -> ToolYaml:
    text = read_local_text(path, field="tool.yaml")
    return ToolYaml.loads(text, where=Path(path).name)


def scaffold_tool_yaml(
    catalog: ToolDefinitions, *, base_url: str | None = None, tool_defs: str = "tool_defs.yaml"
) -> ToolYaml:
    """A starter tool.yaml exposing every compiled operation; edit `expose.allow` down to what you need."""
    auth = None
    if declares_no_security(catalog):
        # The document cannot tell whether the API needs a credential: the author must say (none, or
        # the scheme the provider documents elsewhere); materialize refuses a connector that says nothing.
        auth = ToolAuth(type="none")
    elif catalog.auth is not None:
        auth = ToolAuth(
            type=catalog.auth.type,
            env=f"{catalog.name.upper().replace('-', '_')}_TOKEN",
            location=catalog.auth.location if catalog.auth.type in ("api_key", "path") else None,
            name=catalog.auth.name if catalog.auth.type in ("api_key", "path") else None,
            prefix=catalog.auth.prefix if catalog.auth.type == "api_key" else None,
        )
    return ToolYaml(
        name=catalog.name,
        tool_defs=tool_defs,
        source=ToolSource(base_url=base_url or catalog.source.base_url),
        expose=ToolExpose(allow=[t.operation_id or t.name for t in catalog.tools]),
        auth=auth,
    )


def materialize_connector(tool: ToolYaml, catalog: ToolDefinitions) -> ToolDefinitions:
    """The connector the runtime executes: allowed tools only, base URL and credential env name bound."""
    if not tool.source.base_url:
        raise ConnectorError(
            f"tool.yaml {tool.name}: source.base_url is required at runtime; "
            "set it to the provider's API root "
            f"(the document suggests {catalog.source.base_url or 'nothing'})"
        )
    if tool.auth is None and declares_no_security(catalog):
        raise ConnectorError(
            f"tool.yaml {tool.name}: the document declares no security scheme, so the connector cannot "
            "tell whether the API needs a credential; add auth: with the provider's scheme (type, env, ...) "
            "or auth: {type: none} to call it without one on purpose"
        )
    selected = _select(tool, catalog)
    auth = _bind_auth(tool, catalog)
    tools = [_rebind(spec, tool=tool, catalog=catalog, auth=auth) for spec in selected]
    _rename(tools, connector=tool.name, catalog=catalog.name)
    return ToolDefinitions(
        name=tool.name,
        source=SourceSpec(base_url=tool.source.base_url),
        auth=auth,
        auth_options=[],
        tls=tool.tls,
        headers=tool.headers,
        tools=tools,
        provenance=catalog.provenance,
    )


def _select(tool: ToolYaml, catalog: ToolDefinitions) -> list[ToolSpec]:
    by_key: dict[str, ToolSpec] = {}
    for spec in catalog.tools:
        by_key[spec.name] = spec
        if spec.operation_id:
            by_key.setdefault(spec.operation_id, spec)
    chosen: dict[str, ToolSpec] = {}
    for entry in tool.expose.allow:
        if entry == "*":
            chosen.update((spec.name, spec) for spec in catalog.tools)
            continue
        spec = by_key.get(entry)
        if spec is None:
            skipped = next(
                (s for s in catalog.skipped if entry in (s.operation_id, f"{s.method} {s.path}")), None
            )
            hint = f" (it was skipped when compiling: {skipped.reason})" if skipped else ""
            raise ConnectorError(
                f"tool.yaml {tool.name}: expose.allow entry {entry!r} names no operation in catalog "
                f"{catalog.name!r}{hint}; use an operationId or tool name from {tool.tool_defs}, "
                "or remove the entry"
            )
        chosen[spec.name] = spec
    order = {spec.name: index for index, spec in enumerate(catalog.tools)}
    return sorted(chosen.values(), key=lambda spec: order[spec.name])


def declares_no_security(catalog: ToolDefinitions) -> bool:
    """The compiled document named no security scheme at all (no default, no option)."""
    return catalog.auth is None and not catalog.auth_options


def _bind_auth(tool: ToolYaml, catalog: ToolDefinitions) -> AuthSpec | None:
    """tool.yaml's auth, with what it leaves out taken from the catalog's matching security scheme."""
    if tool.auth is None or tool.auth.type == "none":
        return None
    wanted = tool.auth
    schemes = [o for o in (catalog.auth, *catalog.auth_options) if o is not None]
    if wanted.type in ("api_key", "path") and not (
        wanted.name and (wanted.location or wanted.type == "path")
    ):
        known = next((o for o in schemes if o.type == wanted.type), None)
        if known is None:
            raise ConnectorError(
                f"tool.yaml {tool.name}: auth.type {wanted.type!r} needs auth.name"
                + (
                    " and auth.in (header, query or cookie)"
                    if wanted.type == "api_key"
                    else " (the path parameter)"
                )
                + " because the catalog declares no such scheme"
            )
        prefix = wanted.prefix if wanted.prefix is not None else known.prefix
        return AuthSpec(
            type=known.type, env=wanted.env, location=known.location, name=known.name, prefix=prefix
        )
    location = "path" if wanted.type == "path" else wanted.location
    prefix = wanted.prefix
    if prefix is None and wanted.type == "api_key":
        # The same scheme the document declares (header names are case-insensitive): its prefix too.
        same = next((o for o in schemes if _same_api_key(o, location=location, name=wanted.name)), None)
        prefix = same.prefix if same is not None else None
    return AuthSpec(type=wanted.type, env=wanted.env, location=location, name=wanted.name, prefix=prefix)


def _same_api_key(option: AuthSpec, *, location: str | None, name: str | None) -> bool:
    if option.type != "api_key" or option.location != location or option.name is None or name is None:
        return False
    return option.name.lower() == name.lower() if location == "header" else option.name == name


def _rebind(spec: ToolSpec, *, tool: ToolYaml, catalog: ToolDefinitions, auth: AuthSpec | None) -> ToolSpec:
    """A copy of the tool; with a credential in the path, that parameter leaves the agent-facing schema."""
    data: dict[str, Any] = spec.model_dump(by_alias=True)
    if auth is not None and auth.type == "path" and auth.name:
        param = next((p for p in data["params"] if p["in"] == "path" and p["name"] == auth.name), None)
        if param is not None:
            arg = param["arg"]
            schema = data["inputSchema"]
            schema["properties"] = {k: v for k, v in schema["properties"].items() if k != arg}
            schema["required"] = [r for r in schema["required"] if r != arg]
    return ToolSpec.model_validate(data)


def _rename(tools: list[ToolSpec], *, connector: str, catalog: str) -> None:
    if connector == catalog:
        return
    taken: set[str] = set()
    for spec in tools:
        name = tool_name(connector, spec.operation_id or spec.name.removeprefix(f"{catalog}_"))
        if name in taken:
            name = disambiguate(name, f"{spec.method} {spec.path}", taken)
        taken.add(name)
        spec.name = name
    renamed = distinguish_hashed({(spec.method, spec.path): spec.name for spec in tools})
    for spec in tools:
        spec.name = renamed[(spec.method, spec.path)]
