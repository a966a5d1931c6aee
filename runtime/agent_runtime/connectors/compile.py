"""OpenAPI 3.0 document -> compiled catalog (`ToolDefinitions`), one tool per supported operation."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent_runtime.connectors.definitions import (
    FORM_MEDIA,
    JSON_LIKE_MEDIA,
    JSON_MEDIA,
    AuthSpec,
    BodySpec,
    ParamSpec,
    Provenance,
    SkippedOperation,
    SourceSpec,
    ToolDefinitions,
    ToolSpec,
)
from agent_runtime.connectors.documents import (
    parse_document_text,
    read_document_file,
)
from agent_runtime.connectors.errors import ConnectorError, DocumentTooComplexError, ExternalReferenceError
from agent_runtime.connectors.naming import assign_names, check_connector_name, operation_key
from agent_runtime.connectors.path_segments import is_multi_segment
from agent_runtime.connectors.schema import SchemaTranslator, plain_description, trim_text

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# Media ranges that accept anything: the body is sent as JSON (Kubernetes declares create/replace so).
_WILDCARD_MEDIA = frozenset(("*/*", "application/*"))
# Among several JSON patch types, the one whose semantics fit the body's shape.
_OBJECT_PATCH_MEDIA = ("application/merge-patch+json", "application/strategic-merge-patch+json")
_ARRAY_PATCH_MEDIA = ("application/json-patch+json",)
_IGNORED_HEADERS = frozenset(("accept", "content-type", "authorization"))  # OpenAPI: these params are ignored
_WRAP_NAMES = ("body", "request_body", "body_")
_TEMPLATE_VARIABLE = re.compile(r"\{([^{}/]+)\}")


class _Skip(Exception):
    """Raised inside one operation's compilation: the operation is skipped with this reason."""


def compile_catalog(document: str | Path | Mapping[str, Any], *, connector_name: str) -> ToolDefinitions:
    """Compile an OpenAPI 3.0.x document (a local JSON/YAML path, or a parsed mapping) into a catalog."""
    check_connector_name(connector_name, field="connector_name")
    if isinstance(document, Mapping):
        data: Any = document
        fingerprint = _fingerprint_data(document)
    else:
        data, fingerprint = read_document_file(document, field="document", with_fingerprint=True)
    return compile_document(data, connector_name=connector_name, fingerprint=fingerprint)


def load_catalog_text(text: str, *, connector_name: str) -> ToolDefinitions:
    """Text holding an OpenAPI 3.0 document or a compiled catalog (detected) -> a catalog."""
    check_connector_name(connector_name, field="connector_name")
    data = parse_document_text(text, field="catalog")
    if isinstance(data, Mapping) and "format_version" in data and "tools" in data:
        return ToolDefinitions.from_data(data, where="catalog")
    fingerprint = hashlib.sha256(text.encode()).hexdigest()
    return compile_document(data, connector_name=connector_name, fingerprint=fingerprint)


def compile_document(data: Any, *, connector_name: str, fingerprint: str | None = None) -> ToolDefinitions:
    """The pure compiler: parsed document -> catalog."""
    _check_openapi_version(data)
    paths = data.get("paths")
    if not isinstance(paths, Mapping):
        raise ConnectorError("document: 'paths' must be a mapping of path -> path item; add the API's paths")
    translator = SchemaTranslator(data)
    auth_options, scheme_names = _auth_options(data)
    default_auth = _default_auth(data.get("security"), auth_options, scheme_names)

    compiled: list[tuple[str, str, str, ToolSpec]] = []
    skipped: list[SkippedOperation] = []
    for raw_path, raw_item in paths.items():
        path = str(raw_path)
        item = translator.deref(raw_item, where=f"paths.{path}") if isinstance(raw_item, Mapping) else None
        if not isinstance(item, Mapping):
            continue
        for method in METHODS:
            operation = item.get(method)
            if not isinstance(operation, Mapping):
                continue
            op_id = operation.get("operationId")
            op_id = str(op_id) if op_id not in (None, "") else None
            try:
                spec = _compile_operation(
                    translator,
                    path=path,
                    method=method,
                    operation=operation,
                    path_params=item.get("parameters") or [],
                )
            except _Skip as reason:
                skipped.append(
                    SkippedOperation(method=method.upper(), path=path, operation_id=op_id, reason=str(reason))
                )
                continue
            except (ExternalReferenceError, DocumentTooComplexError):
                raise
            except ConnectorError as exc:
                skipped.append(
                    SkippedOperation(method=method.upper(), path=path, operation_id=op_id, reason=str(exc))
                )
                continue
            except (TypeError, AttributeError, KeyError, ValueError, RecursionError) as exc:
                # A shape the document's schema would not allow (a list where an object belongs...):
                # that operation is unusable, the rest of the document still compiles.
                reason = (
                    f"{method.upper()} {path}: malformed operation ({type(exc).__name__}: {str(exc)[:200]})"
                )
                skipped.append(
                    SkippedOperation(method=method.upper(), path=path, operation_id=op_id, reason=reason)
                )
                continue
            spec.authenticated = _operation_authenticated(operation)
            compiled.append((method.upper(), path, op_id or operation_key(method, path), spec))

    names = assign_names(connector_name, [(m, p, label) for m, p, label, _ in compiled])
    tools = []
    for method, path, _label, spec in compiled:
        spec.name = names[(method, path)]
        tools.append(spec)
    info = data.get("info") if isinstance(data.get("info"), Mapping) else {}
    return ToolDefinitions(
        name=connector_name,
        source=SourceSpec(base_url=_server_url(data.get("servers"))),
        auth=default_auth,
        auth_options=auth_options,
        tools=tools,
        skipped=skipped,
        provenance=Provenance(
            document_sha256=fingerprint,
            title=str(info.get("title")) if info.get("title") is not None else None,
            version=str(info.get("version")) if info.get("version") is not None else None,
        ),
    )


def _check_openapi_version(data: Any) -> None:
    if not isinstance(data, Mapping):
        raise ConnectorError("document: expected an OpenAPI 3.0 object at the top level")
    if "swagger" in data:
        raise ConnectorError(
            f"document: swagger {data['swagger']!r} (OpenAPI 2) is not supported; "
            "convert it to OpenAPI 3.0 first"
        )
    version = str(data.get("openapi", ""))
    if not re.match(r"^3\.0(\.\d+)?$", version):
        raise ConnectorError(
            f"document: openapi {version or '(missing)'!r} is not supported; "
            "this compiler reads OpenAPI 3.0.x "
            "documents (set 'openapi: 3.0.3' if the document is 3.0-compatible)"
        )


def _fingerprint_data(document: Mapping[str, Any]) -> str:
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _server_url(servers: Any) -> str | None:
    """The document's first absolute server URL, as a suggestion only: tool.yaml's base_url decides."""
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], Mapping):
        return None
    url = str(servers[0].get("url", ""))
    for name, variable in (servers[0].get("variables") or {}).items():
        if isinstance(variable, Mapping) and "default" in variable:
            url = url.replace("{" + str(name) + "}", str(variable["default"]))
    return url if re.match(r"^https?://[^{}\s]+$", url) else None


def _auth_options(data: Mapping[str, Any]) -> tuple[list[AuthSpec], dict[str, AuthSpec]]:
    components = data.get("components") if isinstance(data.get("components"), Mapping) else {}
    schemes = components.get("securitySchemes") or {}
    options: list[AuthSpec] = []
    by_name: dict[str, AuthSpec] = {}
    if not isinstance(schemes, Mapping):
        return options, by_name
    for scheme_name, scheme in schemes.items():
        if not isinstance(scheme, Mapping):
            continue
        spec = _presentation(str(scheme_name), scheme)
        if spec is not None:
            options.append(spec)
            by_name[str(scheme_name)] = spec
    return options, by_name


def _presentation(scheme_name: str, scheme: Mapping[str, Any]) -> AuthSpec | None:
    kind = str(scheme.get("type", "")).lower()
    if kind == "http":
        http_scheme = str(scheme.get("scheme", "")).lower()
        if http_scheme in ("bearer", "basic"):
            return AuthSpec(type=http_scheme, scheme_name=scheme_name)
        return None
    if kind in ("oauth2", "openidconnect"):
        return AuthSpec(type="bearer", scheme_name=scheme_name)  # a token obtained elsewhere, sent as bearer
    if kind == "apikey":
        location = str(scheme.get("in", "")).lower()
        name = scheme.get("name")
        if location in ("header", "query", "cookie", "path") and isinstance(name, str) and name:
            kind_name = "path" if location == "path" else "api_key"
            return AuthSpec(
                type=kind_name,
                location=location,
                name=name,
                prefix=_bearer_prefix(scheme_name, scheme, location=location, name=name),
                scheme_name=scheme_name,
            )
    return None


def _bearer_prefix(scheme_name: str, scheme: Mapping[str, Any], *, location: str, name: str) -> str | None:
    """ "Bearer " for an apiKey scheme on the Authorization header that says it is a bearer token.

    Kubernetes declares its tokens so (`BearerToken`: apiKey, header `authorization`); sent bare they get
    a 401. Any other apiKey on Authorization is sent as is: tool.yaml's `auth.prefix` says otherwise.
    """
    if location != "header" or name.lower() != "authorization":
        return None
    description = scheme.get("description") if isinstance(scheme.get("description"), str) else ""
    return "Bearer " if "bearer" in f"{scheme_name} {description}".lower() else None


def _default_auth(security: Any, options: list[AuthSpec], by_name: dict[str, AuthSpec]) -> AuthSpec | None:
    if isinstance(security, list):
        for requirement in security:
            if isinstance(requirement, Mapping):
                for scheme_name in requirement:
                    if str(scheme_name) in by_name:
                        return by_name[str(scheme_name)]
    return options[0] if options else None


def _operation_authenticated(operation: Mapping[str, Any]) -> bool:
    """Whether the connector's credential goes with this operation: wherever the document allows one.

    The document may declare no scheme at all and tool.yaml still bind one, so absence means "inherit".
    An empty requirement `{}` only makes authentication optional (Jira lists it beside its schemes on
    most operations): with any named requirement present the credential is sent. Only an operation
    that names none (`security: []`, or nothing but `{}`) goes out anonymous.
    """
    security = operation.get("security")
    if not isinstance(security, list):
        return True
    return any(isinstance(requirement, Mapping) and requirement for requirement in security)


def _compile_operation(
    translator: SchemaTranslator,
    *,
    path: str,
    method: str,
    operation: Mapping[str, Any],
    path_params: Any,
) -> ToolSpec:
    where = f"{method.upper()} {path}"
    merged: dict[tuple[str, str], Mapping[str, Any]] = {}
    for source in (path_params, operation.get("parameters") or []):
        if not isinstance(source, list):
            raise _Skip(f"{where}: parameters must be a list")
        for raw in source:
            param = translator.deref(raw, where=f"{where} parameter")
            if not isinstance(param, Mapping) or "name" not in param or "in" not in param:
                raise _Skip(f"{where}: a parameter lacks 'name' or 'in'")
            merged[(str(param["name"]), str(param["in"]))] = param

    properties: dict[str, Any] = {}
    required: list[str] = []
    params: list[ParamSpec] = []
    for (name, location), param in merged.items():
        if location not in ("path", "query", "header", "cookie"):
            raise _Skip(f"{where}: parameter {name!r} is in {location!r}, which is not supported")
        if location == "header" and name.lower() in _IGNORED_HEADERS:
            continue
        if "content" in param:
            raise _Skip(
                f"{where}: parameter {name!r} uses 'content' (not supported; only 'schema' parameters)"
            )
        schema = translator.translate(param.get("schema", {}), where=f"{where} parameter {name}")
        if "description" in param and "description" not in schema and isinstance(param["description"], str):
            schema = {**schema, "description": trim_text(param["description"])}
        arg = name if name not in properties else f"{name}_{location}"
        is_required = location == "path" or param.get("required") is True
        default_style = "simple" if location in ("path", "header") else "form"
        style = str(param.get("style", default_style))
        raw_schema = param.get("schema")
        raw_schema = raw_schema if isinstance(raw_schema, Mapping) else None
        multi = location == "path" and is_multi_segment(param, raw_schema)
        params.append(
            ParamSpec(
                name=name,
                arg=arg,
                location=location,
                style=style,
                explode=bool(param.get("explode", style == "form")),
                required=is_required,
                multi_segment=True if multi else None,
            )
        )
        properties[arg] = schema
        if is_required:
            required.append(arg)
    declared = {p.name for p in params if p.location == "path"}
    for variable in _TEMPLATE_VARIABLE.findall(path):
        if variable not in declared:  # documents forget these; the call still needs a value
            arg = variable if variable not in properties else f"{variable}_path"
            params.append(
                ParamSpec(
                    name=variable, arg=arg, location="path", style="simple", explode=False, required=True
                )
            )
            properties[arg] = {"type": "string"}
            required.append(arg)
            declared.add(variable)

    body, body_note = _compile_body(
        translator, operation.get("requestBody"), where=where, properties=properties, required=required
    )
    input_schema = {"type": "object", "properties": properties, "required": required}
    summary = operation.get("summary") if isinstance(operation.get("summary"), str) else ""
    details = operation.get("description") if isinstance(operation.get("description"), str) else ""
    text = "\n\n".join(part.strip() for part in (summary, details) if part and part.strip())
    op_id = operation.get("operationId")
    try:
        return ToolSpec(
            name="",
            operation_id=str(op_id) if op_id not in (None, "") else None,
            method=method.upper(),
            path=path,
            description=_describe(text, method=method, path=path, note=body_note),
            params=params,
            body=body,
            inputSchema=input_schema,
        )
    except ValidationError as exc:  # the strict-JSON check on inputSchema names the offending path
        error = exc.errors()[0]
        cause = error.get("ctx", {}).get("error")
        raise _Skip(f"{where} {cause if cause is not None else error['msg']}") from None


def _compile_body(
    translator: SchemaTranslator,
    raw_body: Any,
    *,
    where: str,
    properties: dict[str, Any],
    required: list[str],
) -> tuple[BodySpec | None, str]:
    """The body's wire plan and what the tool description should say about its media type."""
    if raw_body is None:
        return None, ""
    body = translator.deref(raw_body, where=f"{where} requestBody")
    content = body.get("content") if isinstance(body, Mapping) else None
    if not isinstance(content, Mapping) or not content:
        return None, ""
    media_type = _choose_media(translator, content, where=where)
    if media_type is None:
        kinds = ", ".join(sorted(str(m) for m in content))
        raise _Skip(
            f"{where}: request body media type {kinds} is not supported "
            "(only JSON, form-urlencoded or a wildcard such as */*)"
        )
    media = translator.deref(content[media_type], where=f"{where} requestBody") or {}
    schema = translator.translate(media.get("schema", {}), where=f"{where} requestBody")
    body_required = bool(body.get("required", False))
    wire_type = JSON_MEDIA if media_type.strip().lower() in _WILDCARD_MEDIA else media_type.strip()
    note = _body_note(wire_type, media_type)
    body_props = schema.get("properties")
    plain_object = (
        isinstance(body_props, dict)
        and schema.get("type", "object") == "object"
        and not any(k in schema for k in ("allOf", "oneOf", "anyOf", "not"))
        and not (set(body_props) & set(properties))
    )
    if plain_object:
        assert isinstance(body_props, dict)
        properties.update(body_props)
        if body_required:
            required.extend(name for name in schema.get("required", []) if name in body_props)
        encoding = _form_encoding(media.get("encoding"), body_props) if wire_type == FORM_MEDIA else {}
        spec = BodySpec(
            media_type=wire_type,
            properties=list(body_props),
            required=body_required,
            encoding=encoding,
        )
        return spec, note
    arg = next(
        name for name in (*_WRAP_NAMES, *(f"body_{i}" for i in range(2, 100))) if name not in properties
    )
    properties[arg] = schema
    if body_required:
        required.append(arg)
    return BodySpec(media_type=wire_type, arg=arg, required=body_required), note


def _choose_media(translator: SchemaTranslator, content: Mapping[str, Any], *, where: str) -> str | None:
    """The declared media type the body goes out as: JSON first, then form, then a wildcard (as JSON).

    With only patch types on offer, merge patch for an object body and JSON Patch for an array one:
    sending plain application/json where the document lists neither gets a 415.
    """
    keys = [str(m) for m in content]
    json_like = [m for m in keys if JSON_LIKE_MEDIA.match(m)]
    plain = next((m for m in json_like if _essence(m) == JSON_MEDIA), None)
    if plain is not None or len(json_like) == 1:
        return plain or json_like[0]
    if json_like:
        essences = {_essence(m): m for m in json_like}
        media = translator.deref(content[json_like[0]], where=f"{where} requestBody") or {}
        schema = translator.deref(media.get("schema") or {}, where=f"{where} requestBody") or {}
        is_array = isinstance(schema, Mapping) and schema.get("type") == "array"
        preferred = _ARRAY_PATCH_MEDIA if is_array else _OBJECT_PATCH_MEDIA
        return next((essences[p] for p in preferred if p in essences), json_like[0])
    if FORM_MEDIA in keys:
        return FORM_MEDIA
    return next((m for m in keys if m.strip().lower() in _WILDCARD_MEDIA), None)


def _describe(text: str, *, method: str, path: str, note: str) -> str:
    described = plain_description(text) if text else f"{method.upper()} {path}"
    return f"{described}\n\n{note}" if note else described


def _essence(media_type: str) -> str:
    return media_type.split(";", 1)[0].strip().lower()


def _body_note(media_type: str, declared: str) -> str:
    """What the tool's description says about how its body goes out, when that is not plain JSON."""
    if declared.strip().lower() in _WILDCARD_MEDIA:
        return f"The request body is sent as JSON (the API declares {declared.strip()})."
    if _essence(media_type) not in (JSON_MEDIA, FORM_MEDIA):
        return f"The request body is sent as {_essence(media_type)}."
    return ""


def _form_encoding(raw: Any, body_props: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per-property form encoding; the default for objects and arrays is Stripe-style deepObject."""
    encoding: dict[str, dict[str, Any]] = {}
    raw = raw if isinstance(raw, Mapping) else {}
    for name in body_props:
        entry = raw.get(name)
        if isinstance(entry, Mapping) and ("style" in entry or "explode" in entry):
            style = str(entry.get("style", "form"))
            encoding[name] = {"style": style, "explode": bool(entry.get("explode", style == "form"))}
    return encoding
