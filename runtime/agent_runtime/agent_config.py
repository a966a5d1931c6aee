"""agent.yaml as the runtime reads it: connectors, MCP servers, and `${VAR}` on allow-listed paths (L-03).

`${NAME}` is substituted only in `mcp.servers.*.url`, and only from the tenant's own variables: callers
pass `contract.tenant_env_vars(os.environ)`, never the raw environment, so a platform variable or an LLM
credential can never be spliced into a URL. Everywhere else `${...}` stays exactly as written.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agent_runtime.connectors.agent_yaml import AgentConnectors, read_agent_config
from agent_runtime.connectors.errors import ConnectorError
from agent_runtime.contract import WELL_KNOWN_LLM_KEY_NAMES, is_platform_env

ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
SERVER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
_ENV_NAME = re.compile(ENV_NAME_PATTERN)
# How much of an unclosed placeholder an error quotes: enough to find it in the file.
_TOKEN_QUOTE_CHARS = 40
_LLM_NAMES_CONTEXT = "llm_credential_names"


class AgentConfigError(ConnectorError):
    """agent.yaml cannot be used as written; the message names the path and the bad token, never a value."""


def interpolate(value: str, *, env_vars: Mapping[str, str], path: str) -> str:
    """`${NAME}` -> `env_vars[NAME]`; `$${` -> `${`; a `$` not followed by `{` is literal.

    `${}`, `${1X}`, `${X:-default}` and an unclosed `${X` are errors, as is a name not in `env_vars`.
    Substituted text is not scanned again, so a value containing `${` stays as it is.
    """
    out: list[str] = []
    index = 0
    while (dollar := value.find("$", index)) >= 0:
        out.append(value[index:dollar])
        if value.startswith("$${", dollar):
            out.append("${")
            index = dollar + 3
        elif value.startswith("${", dollar):
            end = value.find("}", dollar + 2)
            if end < 0:
                token = value[dollar : dollar + _TOKEN_QUOTE_CHARS]
                raise AgentConfigError(f"{path}: unclosed placeholder {token!r}; write ${{NAME}}")
            name = value[dollar + 2 : end]
            if not _ENV_NAME.fullmatch(name):
                raise AgentConfigError(
                    f"{path}: malformed placeholder {value[dollar : end + 1]!r}; write ${{NAME}} with NAME "
                    "matching [A-Za-z_][A-Za-z0-9_]* (no defaults; $${ writes a literal ${)"
                )
            if name not in env_vars:
                raise AgentConfigError(
                    f"{path}: ${{{name}}} is not a tenant variable: it is unset, or the platform owns it "
                    "(platform variables and LLM credentials are never substituted)"
                )
            out.append(env_vars[name])
            index = end + 1
        else:
            out.append("$")
            index = dollar + 1
    out.append(value[index:])
    return "".join(out)


class McpAuth(BaseModel):
    """How the runtime authenticates to one MCP server: the env name of a bearer token, never the token;
    or `type: oauth` (B-23), the OAuth client's id and secret named by env too."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token_env: str | None = Field(default=None, pattern=ENV_NAME_PATTERN, max_length=128)
    type: Literal["oauth"] | None = None
    grant: Literal["client_credentials", "authorization_code"] = "client_credentials"
    scope: str | None = Field(default=None, max_length=1000)
    authorization_server: str | None = Field(default=None, max_length=2048)
    client_id_env: str | None = Field(default=None, pattern=ENV_NAME_PATTERN, max_length=128)
    client_secret_env: str | None = Field(default=None, pattern=ENV_NAME_PATTERN, max_length=128)

    @field_validator("token_env", "client_id_env", "client_secret_env")
    @classmethod
    def _tenant_variable(cls, value: str | None, info: ValidationInfo) -> str | None:
        context = info.context or {}
        llm_names = context.get(_LLM_NAMES_CONTEXT, WELL_KNOWN_LLM_KEY_NAMES)
        if value is not None and (is_platform_env(value) or value in llm_names):
            raise ValueError(f"{value} is a platform variable; name a tenant secret instead")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> McpAuth:
        if self.type == "oauth" and self.token_env is not None:
            raise ValueError("token_env and type: oauth exclude each other; keep one")
        if self.type is None and (self.client_id_env or self.client_secret_env or self.authorization_server):
            raise ValueError("client_id_env, client_secret_env and authorization_server need type: oauth")
        return self

    def oauth_config(self) -> dict[str, Any] | None:
        """The connector config's `auth` block for `type: oauth`, else None."""
        if self.type != "oauth":
            return None
        keep = {"type": "oauth", "grant": self.grant, "scope": self.scope}
        keep["authorization_server"] = self.authorization_server
        return {k: v for k, v in keep.items() if v is not None}


class McpServer(BaseModel):
    """One remote MCP server (Streamable HTTP)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(max_length=2048)
    auth: McpAuth | None = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        # The message never quotes the URL: after interpolation it may hold a tenant secret.
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
            raise ValueError("must be an http:// or https:// URL with a host and no whitespace")
        return value


ServerName = Annotated[str, StringConstraints(pattern=SERVER_NAME_PATTERN)]


class McpConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[ServerName, McpServer] = Field(default_factory=dict)


class RuntimeAgentConfig(AgentConnectors):
    """agent.yaml: `version`, `connectors` (the connector core's model) and `mcp.servers`."""

    mcp: McpConfig = Field(default_factory=McpConfig)


def load_runtime_agent_config(
    path: str | Path,
    *,
    env_vars: Mapping[str, str],
    llm_credential_names: Collection[str] = WELL_KNOWN_LLM_KEY_NAMES,
) -> RuntimeAgentConfig:
    """Read, interpolate and validate agent.yaml.

    `env_vars` is `contract.tenant_env_vars(os.environ)`; `llm_credential_names` is
    `contract.llm_credential_names(os.environ)`, which `auth.token_env` may not name either.
    """
    config_file = Path(path)
    data = read_agent_config(config_file)
    try:
        data = _interpolate_allowed(data, env_vars=env_vars)
    except AgentConfigError as exc:
        raise AgentConfigError(f"{config_file.name}: {exc}") from None
    try:
        return RuntimeAgentConfig.model_validate(
            data, context={_LLM_NAMES_CONTEXT: frozenset(llm_credential_names)}
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors()
        )
        raise AgentConfigError(f"{config_file.name}: {problems}") from None


def _interpolate_allowed(data: dict[str, Any], *, env_vars: Mapping[str, str]) -> dict[str, Any]:
    """A copy of `data` with `mcp.servers.*.url` interpolated; the only allow-listed path."""
    mcp = data.get("mcp")
    servers = mcp.get("servers") if isinstance(mcp, dict) else None
    if not isinstance(mcp, dict) or not isinstance(servers, dict):
        return data
    interpolated: dict[Any, Any] = {}
    for name, server in servers.items():
        if isinstance(server, dict) and isinstance(server.get("url"), str):
            url = interpolate(server["url"], env_vars=env_vars, path=f"mcp.servers.{name}.url")
            server = {**server, "url": url}
        interpolated[name] = server
    return {**data, "mcp": {**mcp, "servers": interpolated}}


__all__ = [
    "AgentConfigError",
    "McpAuth",
    "McpConfig",
    "McpServer",
    "RuntimeAgentConfig",
    "interpolate",
    "load_runtime_agent_config",
]
