"""An Agent's connector bundle: materialized by the connector core, split into immutable ConfigMaps.

The connector core's `materialize_connector` and `build_bundle` are the one code path shared with the
runtime, so a bundle built here is byte-identical to one the runtime builds from the same inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from agent_operator.inputs import InputProblem
from agent_operator.models import Connector
from agent_runtime.connectors import (
    BUNDLE_INDEX,
    ToolDefinitions,
    ToolYaml,
    build_bundle,
    load_catalog_text,
    materialize_connector,
)
from agent_runtime.contract import is_platform_env

BUNDLE = "BundleReady"


@dataclass(frozen=True)
class BundlePart:
    """One immutable ConfigMap of the bundle: its name and flat keys."""

    name: str
    data: Mapping[str, str]


@dataclass(frozen=True)
class RenderedBundle:
    digest: str
    tool_count: int
    parts: tuple[BundlePart, ...]

    @property
    def config_map_names(self) -> tuple[str, ...]:
        return tuple(part.name for part in self.parts)


def _is_flat_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\\" not in name and name not in {".", ".."}


def materialize(connector: Connector, config_maps: Mapping[str, Mapping[str, str] | None]) -> ToolDefinitions:
    """The Connector's selected tools with base URL and credential env bound, or InputProblem."""
    name = connector.meta.name
    ref = connector.spec.catalog.config_map_key_ref
    where = f"Connector {name}: spec.catalog.configMapKeyRef"
    if not _is_flat_name(ref.key) or ".." in ref.key:
        raise InputProblem(
            reason="PathEscape",
            condition=BUNDLE,
            message=f"{where}.key {ref.key!r} is not a plain file name; name a key like openapi.yaml",
        )
    auth = connector.spec.auth
    if auth is not None and auth.env and is_platform_env(auth.env):
        # The Tool Pod never hands platform variables to connectors; it would refuse to start.
        raise InputProblem(
            reason="AuthEnvReserved",
            condition=BUNDLE,
            message=f"Connector {name}: spec.auth.env {auth.env!r} is a platform variable name; "
            "choose another, e.g. " + f"{name.upper().replace('-', '_')}_TOKEN",
        )
    data = config_maps.get(ref.name)
    if data is None:
        raise InputProblem(
            reason="CatalogMissing",
            condition=BUNDLE,
            message=f"{where}.name: ConfigMap {ref.name!r} does not exist; create it or fix the name",
        )
    if ref.key not in data:
        known = ", ".join(sorted(data)) or "none"
        raise InputProblem(
            reason="CatalogKeyMissing",
            condition=BUNDLE,
            message=f"{where}.key: ConfigMap {ref.name!r} has no key {ref.key!r} (keys: {known})",
        )
    try:
        catalog = load_catalog_text(data[ref.key], connector_name=name)
    except (ValueError, TypeError) as exc:
        raise InputProblem(
            reason="CatalogInvalid",
            condition=BUNDLE,
            message=f"{where}: ConfigMap {ref.name!r} key {ref.key!r} is neither a valid OpenAPI 3.0 "
            f"document nor a compiled catalog: {_first_line(exc)}",
        ) from exc
    allow = connector.spec.expose.allow if connector.spec.expose.allow is not None else ("*",)
    if allow != ("*",):
        known_names = {t.name for t in catalog.tools} | {
            t.operation_id for t in catalog.tools if t.operation_id
        }
        known_names.add("*")
        unknown = [entry for entry in allow if entry not in known_names]
        if unknown:
            raise InputProblem(
                reason="ExposeAllowUnknown",
                condition=BUNDLE,
                message=f"Connector {name}: spec.expose.allow entries {unknown} name no operation in the "
                f"catalog; remove them or use one of: {', '.join(sorted(known_names)[:20])}",
            )
    auth = connector.spec.auth
    auth_yaml = None
    if auth and auth.type.value != "none" and auth.env:
        auth_yaml = {"type": auth.type.value, "env": auth.env, "in": auth.location, "name": auth.name}
    try:
        tool_yaml = ToolYaml.model_validate(
            {
                "name": name,
                "tool_defs": ref.key,
                "source": {"type": connector.spec.source.type, "base_url": connector.spec.source.base_url},
                "expose": {"allow": list(allow)},
                "auth": auth_yaml,
            }
        )
        return materialize_connector(tool_yaml, catalog)
    except ValueError as exc:
        raise InputProblem(
            reason="ConnectorInvalid", condition=BUNDLE, message=f"Connector {name}: {_describe(exc)}"
        ) from exc


def render_bundle(
    *,
    agent_name: str,
    connectors: Sequence[ToolDefinitions],
    budget_bytes: int,
    max_parts: int,
) -> RenderedBundle:
    """Build the bundle and pack its flat files into ConfigMaps named by digest; never truncate."""
    bundle = build_bundle(list(connectors))
    files: dict[str, str] = {}
    for file_name, content in sorted(bundle.files.items()):
        if not _is_flat_name(file_name):
            raise InputProblem(
                reason="PathEscape",
                condition=BUNDLE,
                message=f"bundle file {file_name!r} is not a flat name inside the bundle directory",
            )
        files[file_name] = content.decode("utf-8")
    if BUNDLE_INDEX not in files:
        raise InputProblem(reason="BundleInvalid", condition=BUNDLE, message="the bundle has no index file")
    groups = _pack(files, budget_bytes=budget_bytes)
    if len(groups) > max_parts:
        total = sum(len(k) + len(v.encode()) for k, v in files.items())
        raise InputProblem(
            reason="BundleTooLarge",
            condition=BUNDLE,
            message=f"the connector bundle is {total} bytes, more than {max_parts} ConfigMaps of "
            f"{budget_bytes} bytes; narrow spec.expose.allow on the largest Connectors",
        )
    stem = f"{agent_name}-bundle-{bundle.digest[:12]}"
    names = [stem] if len(groups) == 1 else [f"{stem}-{i}" for i in range(len(groups))]
    return RenderedBundle(
        digest=bundle.digest,
        tool_count=bundle.tool_count,
        parts=tuple(BundlePart(name=n, data=g) for n, g in zip(names, groups, strict=True)),
    )


def _pack(files: Mapping[str, str], *, budget_bytes: int) -> list[dict[str, str]]:
    """First-fit in name order, index first; a single file over the budget cannot be split."""
    groups: list[dict[str, str]] = [{}]
    used = [0]
    order = [BUNDLE_INDEX, *(n for n in files if n != BUNDLE_INDEX)]
    for file_name in order:
        size = len(file_name) + len(files[file_name].encode())
        if size > budget_bytes:
            raise InputProblem(
                reason="BundleTooLarge",
                condition=BUNDLE,
                message=f"bundle file {file_name!r} is {size} bytes, over one ConfigMap's {budget_bytes}; "
                "narrow spec.expose.allow on that Connector",
            )
        if used[-1] + size > budget_bytes:
            groups.append({})
            used.append(0)
        groups[-1][file_name] = files[file_name]
        used[-1] += size
    return groups


def _describe(exc: ValueError) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        return f"field {'.'.join(str(p) for p in error['loc'])}: {error['msg']}"
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
