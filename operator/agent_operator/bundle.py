"""An Agent's connector bundle: materialized by the connector core, split into immutable ConfigMaps.

The connector core's `materialize_connector` and `build_bundle` are the one code path shared with the
runtime, so a bundle built here is byte-identical to one the runtime builds from the same inputs. A
built-in connector type (`source.type` other than openapi) is materialized from `spec.config` by the same
registry the Tool Pod runs it with.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from pydantic import ValidationError

from agent_operator.a2a_agents import is_a2a_agent, materialize_agent_connector
from agent_operator.inputs import CatalogFailure, Catalogs, InputProblem, catalog_key, connector_ca_env
from agent_operator.mcp import is_mcp, materialize_mcp_connector
from agent_operator.models import Connector
from agent_operator.shared import PREFIX
from agent_runtime.connectors import (
    BUNDLE_INDEX,
    ToolDefinitions,
    ToolYaml,
    build_bundle,
    load_catalog_text,
    materialize_connector,
)
from agent_runtime.connectors.builtin.registry import connector_class, materialize_builtin
from agent_runtime.connectors.default_headers import check_default_headers
from agent_runtime.connectors.errors import DocumentTooComplexError
from agent_runtime.connectors.framework import BuiltinConnectorDefs, ConnectorConfigError
from agent_runtime.contract import is_platform_env

BUNDLE = "BundleReady"
# The connector core's rule for a connector name (it prefixes every tool name), in Kubernetes' alphabet.
CONNECTOR_NAME = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
_BUNDLE_NAME = re.compile(r"^(?P<agent>.+)-bundle-(?P<digest>[0-9a-f]{12})(?:-(?P<part>[0-9]+))?$")
BIG_DOCUMENT_HINT = (
    "a ConfigMap holds at most 1 MiB, and plain `kubectl apply` refuses one over 256 KiB (its "
    "last-applied annotation): create it with `kubectl apply --server-side` or `kubectl create configmap "
    "--from-file`, or store the smaller compiled catalog (`python -m agent_runtime.connectors compile`)"
)


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


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a provider's base URL (scheme, host, port), or None."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # e.g. a port over 65535
        return f"{exc}; write a port from 1 to 65535"
    if parts.scheme not in ("http", "https"):
        return "the scheme must be http or https"
    if not parts.hostname:
        return "it names no host"
    if port == 0:
        return "port 0 is not a TCP port; write a port from 1 to 65535"
    return None


# Where clouds serve instance metadata (and with it the node's credentials): IPv4 link-local (AWS, GCP,
# Azure, OCI: 169.254.169.254; ECS: 169.254.170.2), IPv6 link-local, AWS's IPv6 endpoint, and the names.
METADATA_NETWORKS = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fd00:ec2::254/128"),
)
METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
)


def host_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address an IP-literal host means, also in the legacy forms a resolver accepts (`2852039166`,
    `0xa9.0xfe.0xa9.0xfe`, `169.254.43518`); None for a DNS name."""
    host = host.strip("[]").split("%", 1)[0].rstrip(".")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:  # inet_aton: each part decimal, 0x hex or 0 octal; the last fills the rest
        try:
            numbers.append(
                int(part, 16 if part[:2].lower() == "0x" else 8 if part[:1] == "0" and part != "0" else 10)
            )
        except ValueError:
            return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        return None
    value = sum(n << (8 * (3 - i)) for i, n in enumerate(head)) + last
    return ipaddress.IPv4Address(value)


def metadata_address_problem(host: str) -> str | None:
    """Why `host` is a link-local or cloud metadata address a connector must not reach, or None."""
    name = host.strip("[]").rstrip(".").lower()
    if name in METADATA_HOSTS:
        return f"{name} is a cloud metadata service"
    address = host_address(host)
    if address is None:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for network in METADATA_NETWORKS:
        if address.version == network.version and address in network:
            return (
                f"{address} is in {network}, link-local, where clouds serve instance metadata and credentials"
            )
    return None


def forbidden_address(where: str, host: str, *, reason: str, condition: str = BUNDLE) -> InputProblem | None:
    """The InputProblem for a connector or model endpoint at a metadata address, naming the field."""
    if (problem := metadata_address_problem(host)) is None:
        return None
    return InputProblem(
        reason=reason,
        condition=condition,
        message=f"{where}: {problem}; point it at the provider's own address, or have the platform allow "
        "such addresses (Helm value agents.allowMetadataAddresses, AGENT_OPERATOR_ALLOW_METADATA_ADDRESSES)",
    )


def materialize(
    connector: Connector,
    config_maps: Mapping[str, Mapping[str, str] | None],
    catalogs: Catalogs | None = None,
    *,
    allow_metadata_addresses: bool = False,
) -> ToolDefinitions | BuiltinConnectorDefs:
    """The Connector's selected tools with base URL and credential env bound, or InputProblem.

    A catalog compiled ahead is taken from `catalogs` (by connector name and text digest); else it is
    compiled here. A base URL (or a built-in type's host) at a link-local or cloud metadata address is
    refused unless `allow_metadata_addresses`."""
    definitions = _materialize(connector, config_maps, catalogs)
    if allow_metadata_addresses:
        return definitions
    name = connector.meta.name
    if not connector.spec.is_builtin:
        base_url = connector.spec.source.base_url or ""
        where = f"Connector {name}: spec.source.baseUrl {base_url!r}"
        if problem := forbidden_address(where, urlsplit(base_url).hostname or "", reason="BaseUrlForbidden"):
            raise problem
    for host, _ in egress_endpoints([definitions]):
        if problem := forbidden_address(
            f"Connector {name}: spec.config host {host!r}", host, reason="BaseUrlForbidden"
        ):
            raise problem
    return definitions


def _materialize(
    connector: Connector,
    config_maps: Mapping[str, Mapping[str, str] | None],
    catalogs: Catalogs | None = None,
) -> ToolDefinitions | BuiltinConnectorDefs:
    name = connector.meta.name
    where = f"Connector {name}: spec.catalog.configMapKeyRef"
    if not CONNECTOR_NAME.match(name):
        raise InputProblem(
            reason="ConnectorNameInvalid",
            condition=BUNDLE,
            message=f"Connector {name}: metadata.name must start with a letter and hold only lowercase "
            "letters, digits and '-', at most 40 characters (it prefixes every tool name); recreate the "
            "Connector under such a name, e.g. petstore",
        )
    if connector.spec.is_builtin:
        return materialize_builtin_connector(connector)
    if connector.spec.catalog is None or not connector.spec.source.base_url:
        missing = "spec.catalog" if connector.spec.catalog is None else "spec.source.baseUrl"
        raise InputProblem(
            reason="ConnectorInvalid",
            condition=BUNDLE,
            message=f"Connector {name}: {missing} is required for source.type openapi",
        )
    ref = connector.spec.catalog.config_map_key_ref
    base_url = connector.spec.source.base_url
    if (problem := url_problem(base_url)) is not None:
        raise InputProblem(
            reason="BaseUrlInvalid",
            condition=BUNDLE,
            message=f"Connector {name}: spec.source.baseUrl {base_url!r} is not usable: {problem}",
        )
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
    tls_yaml = _tls_yaml(connector, config_maps)
    data = config_maps.get(ref.name)
    if data is None:
        raise InputProblem(
            reason="CatalogMissing",
            condition=BUNDLE,
            message=f"{where}.name: ConfigMap {ref.name!r} does not exist; create it or fix the name "
            f"({BIG_DOCUMENT_HINT})",
        )
    if ref.key not in data:
        known = ", ".join(sorted(data)) or "none"
        raise InputProblem(
            reason="CatalogKeyMissing",
            condition=BUNDLE,
            message=f"{where}.key: ConfigMap {ref.name!r} has no key {ref.key!r} (keys: {known})",
        )
    text = data[ref.key]
    compiled = (catalogs or {}).get(catalog_key(name, text))
    if compiled is None:
        compiled = compile_catalog_text(text, connector_name=name)
    if isinstance(compiled, CatalogFailure):
        raise InputProblem(
            reason=compiled.reason,
            condition=BUNDLE,
            message=catalog_failure_message(where, ref.name, ref.key, compiled),
        )
    catalog = compiled
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
    headers = _headers(connector)
    auth_yaml = None
    if auth and auth.type.value == "none":
        auth_yaml = {"type": "none"}  # on purpose: a document with no security scheme needs it said
    elif auth and auth.env:
        auth_yaml = {"type": auth.type.value, "env": auth.env, "in": auth.location, "name": auth.name}
    try:
        tool_yaml = ToolYaml.model_validate(
            {
                "name": name,
                "tool_defs": ref.key,
                "source": {"type": connector.spec.source.type, "base_url": connector.spec.source.base_url},
                "expose": {"allow": list(allow)},
                "auth": auth_yaml,
                "tls": tls_yaml,
                "headers": headers,
            }
        )
        return materialize_connector(tool_yaml, catalog)
    except ValueError as exc:
        raise InputProblem(
            reason="ConnectorInvalid", condition=BUNDLE, message=f"Connector {name}: {_describe(exc)}"
        ) from exc


def _headers(connector: Connector) -> dict[str, str] | None:
    """spec.headers as tool.yaml's default headers, or InputProblem naming the header and the fix.

    The CRD already refuses bad names and the credential headers; what only a reconcile can judge (a name
    like a credential's, a value shaped like a token, a ${VAR}) is refused here, never quoting the value."""
    auth = connector.spec.auth
    credential_header = auth.name if auth is not None and auth.location == "header" else None
    try:
        return check_default_headers(connector.spec.headers, credential_header=credential_header)
    except ValueError as exc:
        raise InputProblem(
            reason="HeadersInvalid",
            condition=BUNDLE,
            # The check speaks tool.yaml; a Connector's credential goes in spec.auth.
            message=f"Connector {connector.meta.name}: spec."
            + str(exc).replace("auth:", "spec.auth").replace("in tool.yaml", "in a Connector's headers"),
        ) from None


def _tls_yaml(
    connector: Connector, config_maps: Mapping[str, Mapping[str, str] | None]
) -> dict[str, str] | None:
    """tool.yaml's `tls` for spec.tls (the CA arrives in the Tool Pod as connector_ca_env), or InputProblem
    naming the field. A Secret's key is checked with the Agent's other Secrets (it is not read here)."""
    tls = connector.spec.tls
    if tls is None:
        return None
    name = connector.meta.name
    if not (connector.spec.source.base_url or "").startswith("https://"):
        raise InputProblem(
            reason="TlsInvalid",
            condition=BUNDLE,
            message=f"Connector {name}: spec.tls applies only to an https spec.source.baseUrl; use the "
            "provider's https URL or remove spec.tls",
        )
    if (tls.ca_config_map_key_ref is None) == (tls.ca_secret_key_ref is None):
        raise InputProblem(
            reason="TlsInvalid",
            condition=BUNDLE,
            message=f"Connector {name}: spec.tls needs exactly one of caConfigMapKeyRef or caSecretKeyRef",
        )
    env = connector_ca_env(name)
    if is_platform_env(env):
        raise InputProblem(
            reason="TlsInvalid",
            condition=BUNDLE,
            message=f"Connector {name}: its CA would reach the Tool Pod as {env}, a platform variable name; "
            "recreate the Connector under another name to use spec.tls",
        )
    ref = tls.ca_config_map_key_ref
    if ref is not None:
        where = f"Connector {name}: spec.tls.caConfigMapKeyRef"
        data = config_maps.get(ref.name)
        if data is None:
            raise InputProblem(
                reason="CaMissing",
                condition=BUNDLE,
                message=f"{where}.name: ConfigMap {ref.name!r} does not exist; create it or fix the name",
            )
        if not data.get(ref.key, "").strip():
            known = ", ".join(sorted(data)) or "none"
            raise InputProblem(
                reason="CaKeyMissing",
                condition=BUNDLE,
                message=f"{where}.key: ConfigMap {ref.name!r} has no (non-empty) key {ref.key!r} "
                f"(keys: {known})",
            )
    return {"ca_env": env}


def connector_ca_values(
    connectors: Sequence[Connector], config_maps: Mapping[str, Mapping[str, str] | None]
) -> list[tuple[str, str]]:
    """(variable, PEM text) for each Connector whose spec.tls CA is in a ConfigMap: the Tool Pod's plain
    env (a CA is no secret, and a changed CA changes the pod template, so the Tool Pod rolls). Call after
    materialize, which reports a missing ConfigMap or key."""
    values: list[tuple[str, str]] = []
    for connector in connectors:
        tls = connector.spec.tls
        if tls is None or tls.ca_config_map_key_ref is None:
            continue
        ref = tls.ca_config_map_key_ref
        values.append((connector_ca_env(connector.meta.name), (config_maps.get(ref.name) or {})[ref.key]))
    return values


def materialize_builtin_connector(connector: Connector) -> BuiltinConnectorDefs:
    """A built-in type's bundle file from `spec.config` and `spec.credentials`, or InputProblem naming the
    field (`spec.config.port: must be integer`)."""
    if is_mcp(connector):  # its tools come from the recorded discovery, not from the registry
        return materialize_mcp_connector(connector)
    if is_a2a_agent(connector):  # the same: the skills of the card the operator recorded
        return materialize_agent_connector(connector)
    name = connector.meta.name
    spec = connector.spec
    for index, credential in enumerate(spec.credentials):
        if is_platform_env(credential.env):
            raise InputProblem(
                reason="AuthEnvReserved",
                condition=BUNDLE,
                message=f"Connector {name}: spec.credentials[{index}].env {credential.env!r} is a platform "
                f"variable name; choose another, e.g. {name.upper().replace('-', '_')}_"
                f"{credential.field.upper()}",
            )
    try:
        return materialize_builtin(
            name=name,
            type_name=spec.source.type,
            config=spec.config,
            credentials={c.field: c.env for c in spec.credentials},
            allow=spec.expose.allow,
        )
    except ConnectorConfigError as exc:
        reason = "ConnectorTypeUnknown" if exc.field == "source.type" else "ConfigInvalid"
        raise InputProblem(
            reason=reason, condition=BUNDLE, message=f"Connector {name}: spec.{exc.field}: {exc.problem}"
        ) from None


def egress_endpoints(definitions: Sequence[ToolDefinitions | BuiltinConnectorDefs]) -> list[tuple[str, int]]:
    """(host, TCP port) the Tool Pod reaches for its built-in connectors (OpenAPI ones: their base URLs)."""
    return sorted(
        {
            (host, port)
            for defs in definitions
            if isinstance(defs, BuiltinConnectorDefs)
            for host, port in connector_class(defs.type).egress(defs.config)
        }
    )


def compile_catalog_text(text: str, *, connector_name: str) -> ToolDefinitions | CatalogFailure:
    """A catalog key's text -> its catalog, or why not (never raises for bad input)."""
    try:
        return load_catalog_text(text, connector_name=connector_name)
    except DocumentTooComplexError as exc:
        return CatalogFailure(reason="CatalogTooComplex", detail=_first_line(exc))
    except (ValueError, TypeError, RecursionError) as exc:
        return CatalogFailure(reason="CatalogInvalid", detail=_first_line(exc))


def catalog_failure_message(where: str, config_map: str, key: str, failure: CatalogFailure) -> str:
    if failure.reason == "CatalogTooComplex":
        return (
            f"{where}: ConfigMap {config_map!r} key {key!r} is too complex to compile ({failure.detail}); "
            "remove YAML aliases and $ref fan-out, or keep only the paths the agent needs"
        )
    return (
        f"{where}: ConfigMap {config_map!r} key {key!r} is neither a valid OpenAPI 3.0 document nor a "
        f"compiled catalog: {failure.detail}"
    )


def render_bundle(
    *,
    connectors: Sequence[ToolDefinitions | BuiltinConnectorDefs],
    budget_bytes: int,
    max_parts: int,
) -> RenderedBundle:
    """Build the bundle and pack its flat files into ConfigMaps named by digest; never truncate."""
    owners: dict[str, str] = {}
    for defs in connectors:
        for tool in defs.tools:
            if tool.name in owners:
                raise InputProblem(
                    reason="ToolNameConflict",
                    condition=BUNDLE,
                    message=f"spec.connectors: Connectors {owners[tool.name]!r} and {defs.name!r} both offer "
                    f"tool {tool.name!r}; keep one, or narrow one's spec.expose.allow",
                )
            owners[tool.name] = defs.name
    bundle = build_bundle(
        [d for d in connectors if isinstance(d, ToolDefinitions)],
        [d for d in connectors if isinstance(d, BuiltinConnectorDefs)],
    )
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
            f"{budget_bytes} bytes; list only the operations the agent needs in spec.expose.allow of the "
            "largest Connectors (the bundle holds only those)",
        )
    stem = f"{PREFIX}-bundle-{bundle.digest[:12]}"  # shared by every Agent of the namespace with this bundle
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
                "list only the operations the agent needs in that Connector's spec.expose.allow (the "
                "bundle holds only those)",
            )
        if used[-1] + size > budget_bytes:
            groups.append({})
            used.append(0)
        groups[-1][file_name] = files[file_name]
        used[-1] += size
    return groups


def bundle_stem(name: str) -> tuple[str, str] | None:
    """(stem, digest prefix) of a bundle ConfigMap name `agent-engine-bundle-<digest12>[-<part>]` (or, from
    operators before bundles were shared, `<agent>-bundle-...`), or None."""
    match = _BUNDLE_NAME.match(name)
    if match is None:
        return None
    return f"{match['agent']}-bundle-{match['digest']}", match["digest"]


def bundle_tampering(files: Mapping[str, str], *, digest_prefix: str) -> str | None:
    """What is wrong with a bundle's files (all its ConfigMaps' keys) against the digest in its name,
    or None when the index hashes to that digest and lists exactly these files with their hashes."""
    index = files.get(BUNDLE_INDEX)
    if index is None:
        return f"no {BUNDLE_INDEX}"
    if hashlib.sha256(index.encode()).hexdigest()[:12] != digest_prefix:
        return f"{BUNDLE_INDEX} does not hash to the digest {digest_prefix} in the name"
    try:
        entries = {e["file"]: e["sha256"] for e in json.loads(index)["connectors"]}
    except (ValueError, KeyError, TypeError):
        return f"{BUNDLE_INDEX} is not a bundle index"
    extra = sorted(set(files) - set(entries) - {BUNDLE_INDEX})
    if extra:
        return f"files the index does not list: {extra}"
    for file_name, sha in sorted(entries.items()):
        if file_name not in files:
            return f"{file_name} is missing"
        if hashlib.sha256(files[file_name].encode()).hexdigest() != sha:
            return f"{file_name} does not match its hash in {BUNDLE_INDEX}"
    return None


def _describe(exc: ValueError) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        return f"field {'.'.join(str(p) for p in error['loc'])}: {error['msg']}"
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
