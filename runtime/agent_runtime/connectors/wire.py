"""Tool arguments -> the HTTP request on the wire. Pure: a plan per tool is built once, then applied."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from agent_runtime.connectors.definitions import AuthSpec, ParamSpec, ToolSpec
from agent_runtime.connectors.errors import CredentialMissingError, ToolArgumentError
from agent_runtime.connectors.path_segments import multi_segment_text

_QUERY_SAFE = "-_.~"  # RFC 3986 unreserved; brackets are encoded the way browsers and Stripe's SDKs do
_USER_AGENT = "agent-engine-connector/1"
_BODY_METHODS = frozenset(("POST", "PUT", "PATCH"))  # sent with a length even when empty (RFC 9110 8.6)


def scalar_text(value: Any) -> str:
    """How one scalar is written into a path, query, header or form field."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def deep_object_pairs(prefix: str, value: Any, out: list[tuple[str, str]]) -> None:
    """`a[b][0][c]=v` nesting (deepObject, with Stripe's indexed arrays)."""
    if isinstance(value, Mapping):
        if not value:
            out.append((prefix, ""))
        for key, child in value.items():
            deep_object_pairs(f"{prefix}[{key}]", child, out)
    elif isinstance(value, list | tuple):
        if not value:
            out.append((prefix, ""))
        for index, child in enumerate(value):
            deep_object_pairs(f"{prefix}[{index}]", child, out)
    else:
        out.append((prefix, scalar_text(value)))


def style_pairs(name: str, value: Any, *, style: str, explode: bool, out: list[tuple[str, str]]) -> None:
    """Query or form serialization of one parameter, per its OpenAPI style."""
    if style == "deepObject":
        deep_object_pairs(name, value, out)
    elif isinstance(value, list | tuple):
        separator = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(style, ",")
        if explode:
            out.extend((name, scalar_text(item)) for item in value)
        else:
            out.append((name, separator.join(scalar_text(item) for item in value)))
    elif isinstance(value, Mapping):
        if explode:
            for key, child in value.items():
                if isinstance(child, Mapping | list | tuple):
                    deep_object_pairs(f"{name}[{key}]", child, out)
                else:
                    out.append((str(key), scalar_text(child)))
        else:
            out.append((name, ",".join(f"{k},{scalar_text(v)}" for k, v in value.items())))
    else:
        out.append((name, scalar_text(value)))


def encode_pairs(pairs: list[tuple[str, str]]) -> str:
    return "&".join(f"{quote(k, safe=_QUERY_SAFE)}={quote(v, safe=_QUERY_SAFE)}" for k, v in pairs)


def path_text(value: Any, *, style: str, explode: bool, name: str, multi_segment: bool = False) -> str:
    """One path segment value, percent-encoded so it cannot add segments or a query (a multi-segment
    parameter: its segments, each encoded, dot segments refused: path_segments.py)."""
    if isinstance(value, list | tuple):
        text = ",".join(scalar_text(v) for v in value)
    elif isinstance(value, Mapping):
        joiner = "=" if explode else ","
        text = ",".join(f"{k}{joiner}{scalar_text(v)}" for k, v in value.items())
    else:
        text = scalar_text(value)
    if multi_segment and style == "simple":
        if not text:
            raise ToolArgumentError(f"path argument {name!r} is empty; supply a value")
        return multi_segment_text(text, name=name)
    encoded = quote(text, safe="")
    if encoded in (".", "..", ""):
        # A dot segment would be normalized away by the URL parser and reach another operation
        # than the one allowed; an empty one would merge segments. Encode or refuse them.
        if not encoded:
            raise ToolArgumentError(f"path argument {name!r} is empty; supply a value")
        encoded = encoded.replace(".", "%2E")
    if style == "label":
        return f".{encoded}"
    if style == "matrix":
        return f";{name}={encoded}"
    return encoded


@dataclass(frozen=True)
class PreparedRequest:
    """What to send. `secrets` lists every form of the credential that went on the wire."""

    method: str
    url: str
    headers: dict[str, str]
    content: bytes | None
    secrets: tuple[str, ...]
    safe_url: str  # base URL + path template: no argument values, no credential


@dataclass
class RequestPlan:
    """Everything about one tool that does not depend on the call's arguments."""

    method: str
    base: str
    path_parts: list[tuple[str, ParamSpec | None]]
    query_params: list[ParamSpec]
    header_params: list[ParamSpec]
    cookie_params: list[ParamSpec]
    required: tuple[str, ...]
    body: Any
    auth: AuthSpec | None
    safe_url: str
    base_headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_tool(
        cls,
        tool: ToolSpec,
        *,
        base_url: str,
        auth: AuthSpec | None,
        default_headers: Mapping[str, str] | None = None,
    ) -> RequestPlan:
        auth = auth if tool.authenticated else None
        by_name = {p.name: p for p in tool.params if p.location == "path"}
        parts: list[tuple[str, ParamSpec | None]] = []
        template = tool.path
        while "{" in template:
            before, _, rest = template.partition("{")
            name, _, template = rest.partition("}")
            parts.append((before, None))
            param = by_name.get(name)
            if (
                param is None
            ):  # a template variable no parameter declares: fill from the argument of that name
                param = ParamSpec(
                    name=name, arg=name, location="path", style="simple", explode=False, required=True
                )
            parts.append(("", param))
        parts.append((template, None))
        base = base_url.rstrip("/")
        headers = {"accept": "application/json", "user-agent": _USER_AGENT}
        # tool.yaml's default headers (checked there: never a secret); the call's own header params win.
        headers.update(default_headers or {})
        if tool.body is not None:
            headers["content-type"] = tool.body.media_type
        required = list(tool.input_schema.get("required", []))
        credential_arg = auth.name if auth is not None and auth.type == "path" else None
        required = [r for r in required if r != credential_arg]
        return cls(
            method=tool.method,
            base=base,
            path_parts=parts,
            query_params=[p for p in tool.params if p.location == "query"],
            header_params=[p for p in tool.params if p.location == "header"],
            cookie_params=[p for p in tool.params if p.location == "cookie"],
            required=tuple(required),
            body=tool.body,
            auth=auth,
            safe_url=base + tool.path,
            base_headers=headers,
        )

    def prepare(self, arguments: Mapping[str, Any], env: Mapping[str, str]) -> PreparedRequest:
        if not isinstance(arguments, Mapping):
            raise ToolArgumentError(f"arguments must be an object, got {type(arguments).__name__}")
        missing = [name for name in self.required if arguments.get(name) is None]
        if missing:
            raise ToolArgumentError(
                f"missing required argument(s) {', '.join(missing)} for {self.method} {self.safe_url}; "
                "supply them in the tool call"
            )
        credential = self._credential(env)
        auth = self.auth
        path_credential = auth is not None and auth.type == "path"
        secrets: list[str] = []
        segments = []
        for literal, param in self.path_parts:
            if param is None:
                segments.append(literal)
                continue
            if path_credential and param.name == auth.name:  # type: ignore[union-attr]
                encoded = quote(credential or "", safe="")
                secrets.append(encoded)
                segments.append(encoded)
                continue
            value = arguments.get(param.arg)
            if value is None:
                raise ToolArgumentError(
                    f"missing required path argument {param.arg!r}; supply it in the tool call"
                )
            segments.append(
                path_text(
                    value,
                    style=param.style,
                    explode=param.explode,
                    name=param.name,
                    multi_segment=bool(param.multi_segment),
                )
            )
        pairs: list[tuple[str, str]] = []
        for param in self.query_params:
            value = arguments.get(param.arg)
            if value is not None:
                style_pairs(param.name, value, style=param.style, explode=param.explode, out=pairs)
        headers = dict(self.base_headers)
        for param in self.header_params:
            value = arguments.get(param.arg)
            if value is not None:
                headers[param.name] = _header_text(param.name, value)
        cookies = [
            f"{p.name}={quote(scalar_text(arguments[p.arg]), safe=_QUERY_SAFE)}"
            for p in self.cookie_params
            if arguments.get(p.arg) is not None
        ]
        if credential is not None and auth is not None:
            secrets.append(credential)
            if auth.type == "bearer":
                headers["authorization"] = f"Bearer {credential}"
            elif auth.type == "basic":
                userpass = credential if ":" in credential else f"{credential}:"
                token = base64.b64encode(userpass.encode()).decode()
                secrets.append(token)
                headers["authorization"] = f"Basic {token}"
            elif auth.type == "api_key" and auth.name:
                value = f"{auth.prefix}{credential}" if auth.prefix else credential
                if auth.location == "query":
                    pairs.append((auth.name, value))
                    secrets.append(quote(credential, safe=_QUERY_SAFE))
                elif auth.location == "cookie":
                    cookies.append(f"{auth.name}={value}")
                else:
                    headers[auth.name] = value
        if cookies:
            headers["cookie"] = "; ".join(cookies)
        url = self.base + "".join(segments)
        if pairs:
            url = f"{url}?{encode_pairs(pairs)}"
        content = self._content(arguments)
        if content is None:
            headers.pop("content-type", None)
        # Set here, not by the HTTP library: httpx and aiohttp each add their own (aiohttp a length on a
        # bodiless DELETE), and the sync and async paths must put the same bytes on the wire.
        if content is not None:
            headers["content-length"] = str(len(content))
        elif self.method in _BODY_METHODS:
            headers["content-length"] = "0"
        return PreparedRequest(
            method=self.method,
            url=url,
            headers=headers,
            content=content,
            secrets=tuple(s for s in secrets if s),
            safe_url=self.safe_url,
        )

    def _credential(self, env: Mapping[str, str]) -> str | None:
        auth = self.auth
        if auth is None or not auth.env:
            return None
        value = env.get(auth.env)
        if not value:
            raise CredentialMissingError(
                f"credential environment variable {auth.env} is not set; the connector needs it for "
                f"{self.method} {self.safe_url}"
            )
        return value

    def _content(self, arguments: Mapping[str, Any]) -> bytes | None:
        body = self.body
        if body is None:
            return None
        if body.arg is not None:
            payload = arguments.get(body.arg)
            if payload is None:
                return None
        else:
            payload = {name: arguments[name] for name in body.properties if name in arguments}
            if not payload and not body.required:
                return None
        if not body.is_form:  # application/json, or the +json type the document declares (merge patch...)
            return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        pairs: list[tuple[str, str]] = []
        if isinstance(payload, Mapping):
            for name, value in payload.items():
                rule = body.encoding.get(name)
                if rule is not None:
                    style_pairs(name, value, style=rule["style"], explode=rule["explode"], out=pairs)
                elif isinstance(value, Mapping | list | tuple):
                    deep_object_pairs(name, value, pairs)  # what form-encoding APIs (Stripe, Rails) expect
                else:
                    pairs.append((name, scalar_text(value)))
        else:
            raise ToolArgumentError(f"argument {body.arg!r} must be an object to be form-encoded")
        return encode_pairs(pairs).encode()


def _header_text(name: str, value: Any) -> str:
    text = ",".join(scalar_text(v) for v in value) if isinstance(value, list | tuple) else scalar_text(value)
    if "\r" in text or "\n" in text:
        raise ToolArgumentError(f"header argument {name!r} contains a line break; remove it")
    return text


def origin_of(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with default ports made explicit, for same-origin checks."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port
