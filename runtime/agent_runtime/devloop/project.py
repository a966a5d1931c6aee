"""What `agentengine dev DIR` runs: the agent directory, its entrypoint, its connectors, its name.

Reading only; every problem is a DevError whose one line names the fix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from agent_runtime import contract
from agent_runtime.connectors import build_bundle
from agent_runtime.connectors.bundle import Bundle
from agent_runtime.connectors.definitions import ToolDefinitions
from agent_runtime.connectors.errors import ConnectorError
from agent_runtime.connectors.resolve import bundle_from_agent_config

AGENT_FILE = "agent.yaml"
NAMESPACE = "dev"  # the local run's project (Decision 1): agents are `dev/<name>`
_ENTRYPOINT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_DOCKERFILE_ENTRYPOINT = re.compile(rf"\b{contract.ENTRYPOINT_ENV}=(\S+)")
# The database URL schemes a connector address may use, by connector type.
_DB_SCHEMES = {"postgres": ("postgresql", "postgres"), "mysql": ("mysql", "mariadb")}
# Source files whose change restarts the runtimes; caches and editor droppings do not.
WATCHED_SUFFIXES = (".py", ".yaml", ".yml", ".json", ".txt", ".toml")


class DevError(Exception):
    """`agentengine dev` cannot start as asked; the message is one line naming the fix."""


@dataclass(frozen=True)
class DatabaseAddress:
    """A database connector's address given by URL: config fields and the password's value."""

    connector: str
    config: dict[str, object]
    password: str | None


@dataclass(frozen=True)
class DevProject:
    """One agent directory, resolved."""

    directory: Path
    entrypoint: str
    name: str
    uses_memory: bool

    @property
    def agent(self) -> str:
        return f"{NAMESPACE}/{self.name}"

    @property
    def app_id(self) -> str:
        return f"{NAMESPACE}.{self.name}"

    @property
    def agent_file(self) -> Path:
        return self.directory / AGENT_FILE


def agent_name(directory: Path) -> str:
    """The directory's name as a Kubernetes name (what `dev/<name>` and APP_ID use)."""
    name = re.sub(r"[^a-z0-9-]+", "-", directory.name.lower()).strip("-")[:63].strip("-")
    return name or "agent"


def find_entrypoint(directory: Path, *, given: str | None, environ: Mapping[str, str]) -> str:
    """--entrypoint, else $AGENT_ENTRYPOINT, else the `AGENT_ENTRYPOINT=` its Dockerfile sets."""
    source = "--entrypoint"
    entrypoint = given
    if not entrypoint and environ.get(contract.ENTRYPOINT_ENV, "").strip():
        entrypoint, source = environ[contract.ENTRYPOINT_ENV].strip(), f"${contract.ENTRYPOINT_ENV}"
    if not entrypoint:
        dockerfile = directory / "Dockerfile"
        if dockerfile.is_file() and (match := _DOCKERFILE_ENTRYPOINT.search(dockerfile.read_text())):
            entrypoint, source = match.group(1).strip("\"'"), f"{dockerfile.name}'s {contract.ENTRYPOINT_ENV}"
    if not entrypoint:
        raise DevError(
            f"no entrypoint for {directory}: pass --entrypoint MODULE:APP (e.g. my_agent.agent:app) "
            f"or set {contract.ENTRYPOINT_ENV}"
        )
    if not _ENTRYPOINT.match(entrypoint):
        raise DevError(f"{source} {entrypoint!r} is not MODULE:APP; e.g. my_agent.agent:app")
    module = entrypoint.split(":", 1)[0].split(".")
    if not (
        (directory.joinpath(*module).with_suffix(".py")).is_file()
        or (directory.joinpath(*module) / "__init__.py").is_file()
    ):
        raise DevError(
            f"{source} {entrypoint!r}: no module {'.'.join(module)} in {directory}; "
            "pass --entrypoint MODULE:APP naming a module of that directory"
        )
    return entrypoint


def uses_memory(directory: Path) -> bool:
    """Whether the agent's code reaches the Memory server (`app.memory` or the LangGraph store)."""
    for path in sorted(directory.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        with_memory = ("app.memory", "MemoryServerStore")
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if any(marker in text for marker in with_memory):
            return True
    return False


def resolve(
    directory: str | Path,
    *,
    entrypoint: str | None,
    memory: bool | None,
    environ: Mapping[str, str] = os.environ,
) -> DevProject:
    """The project in `directory`; DevError for an unknown directory or a missing agent.yaml."""
    path = Path(directory).expanduser()
    if not path.is_dir():
        raise DevError(
            f"{directory}: no such directory; give the agent's directory (the one with {AGENT_FILE})"
        )
    path = path.resolve()
    if not (path / AGENT_FILE).is_file():
        raise DevError(
            f"{path} has no {AGENT_FILE}; create one (version: 1, connectors: [...]) "
            "or give the agent's directory"
        )
    return DevProject(
        directory=path,
        entrypoint=find_entrypoint(path, given=entrypoint, environ=environ),
        name=agent_name(path),
        uses_memory=uses_memory(path) if memory is None else memory,
    )


def parse_database_url(spec: str) -> tuple[str, str]:
    """`NAME=URL` -> (NAME, URL)."""
    name, sep, url = spec.partition("=")
    if not sep or not name or not url:
        raise DevError(
            f"--db {spec!r}: write CONNECTOR=URL, e.g. shop-db=postgresql://user:pw@127.0.0.1:5432/shop"
        )
    return name, url


def parse_connector_url(spec: str) -> tuple[str, str]:
    """`NAME=URL` -> (NAME, URL): where an OpenAPI connector's API is for this run (an http(s) URL)."""
    name, sep, url = spec.partition("=")
    parts = urlsplit(url)
    if not sep or not name or parts.scheme not in ("http", "https") or not parts.hostname:
        raise DevError(
            f"--connector-url {spec!r}: write CONNECTOR=URL with an http(s) URL, "
            "e.g. echo=http://127.0.0.1:9000"
        )
    return name, url.rstrip("/")


def with_base_urls(
    connectors: Sequence[ToolDefinitions], urls: Sequence[tuple[str, str]]
) -> list[ToolDefinitions]:
    """The OpenAPI connectors with each `--connector-url` as its `source.base_url`; an unknown name is an
    error listing the names there are."""
    by_name = {c.name: c for c in connectors}
    for name, url in urls:
        if name not in by_name:
            known = ", ".join(sorted(by_name)) or "none"
            raise DevError(
                f"--connector-url {name}: {AGENT_FILE} has no OpenAPI connector {name!r} (it has: {known})"
            )
        connector = by_name[name]
        by_name[name] = connector.model_copy(
            update={"source": connector.source.model_copy(update={"base_url": url})}
        )
    return [by_name[c.name] for c in connectors]


def database_address(connector: str, connector_type: str, url: str) -> DatabaseAddress:
    """A database URL as the connector's config (host, port, database, user) and its password."""
    schemes = _DB_SCHEMES.get(connector_type)
    if schemes is None:
        raise DevError(
            f"--db {connector}: a {connector_type} connector has no database URL; only postgres/mysql do"
        )
    parts = urlsplit(url)
    if parts.scheme not in schemes or not parts.hostname:
        raise DevError(
            f"--db {connector}: {parts.scheme or 'the URL'} is not {schemes[0]}://USER:PASSWORD@HOST:PORT/DB"
        )
    config: dict[str, object] = {"host": parts.hostname}
    try:
        if parts.port:
            config["port"] = parts.port
    except ValueError:
        raise DevError(f"--db {connector}: the port is not a number") from None
    if parts.path.strip("/"):
        config["database"] = unquote(parts.path.strip("/"))
    if parts.username:
        config["user"] = unquote(parts.username)
    password = unquote(parts.password) if parts.password is not None else None
    return DatabaseAddress(connector=connector, config=config, password=password)


def project_bundle(
    project: DevProject,
    *,
    databases: Sequence[tuple[str, str]] = (),
    connector_urls: Sequence[tuple[str, str]] = (),
    environ: Mapping[str, str],
) -> tuple[Bundle, dict[str, str]]:
    """agent.yaml's connectors as the operator would bundle them, each `--db` and `--connector-url`
    applied; returns the bundle and the Tool Pod's variables the URLs carried (a password under its
    credential's env name)."""
    try:
        bundle = bundle_from_agent_config(project.agent_file, env=environ)
    except ConnectorError as exc:
        raise DevError(f"{AGENT_FILE}: {exc}") from None
    if not databases and not connector_urls:
        return bundle, {}
    connectors = with_base_urls(bundle.connectors, connector_urls)
    builtins = {b.name: b for b in bundle.builtins}
    secrets: dict[str, str] = {}
    for name, url in databases:
        if name not in builtins:
            known = ", ".join(sorted(builtins)) or "none"
            raise DevError(f"--db {name}: {AGENT_FILE} has no built-in connector {name!r} (it has: {known})")
        connector = builtins[name]
        address = database_address(name, connector.type, url)
        builtins[name] = connector.model_copy(update={"config": {**connector.config, **address.config}})
        if address.password is not None:
            env_name = connector.credentials.get("password")
            if env_name is None:
                raise DevError(
                    f"--db {name}: the connector names no password credential; drop it from the URL"
                )
            secrets[env_name] = address.password
    try:
        return build_bundle(connectors, list(builtins.values())), secrets
    except ConnectorError as exc:
        raise DevError(f"--db: {exc}") from None
