"""`http`: `http.call` (authenticated, any method, under the configured `base_url`; sensitive) and
`http.request` (read-only GET of any http(s) URL, never with a credential; not sensitive).

`http.request` is available without a base URL or credential, so an agent can read public pages without an
authenticated connector (C-05). `allow_hosts`, when set, limits the hosts it may read.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin

import httpx

from agent_runtime.connectors.builtin._rest import RestClient, host_port
from agent_runtime.connectors.framework import (
    BuiltinConnector,
    BuiltinToolError,
    ConnectorConfigError,
    TestResult,
    tool,
)
from agent_runtime.connectors.wire import origin_of

_HEADERS = {
    "type": "object",
    "additionalProperties": {"type": "string", "maxLength": 4096},
    "maxProperties": 50,
}
# Headers the caller may not set: the connector owns the credential and the framing.
_RESERVED_HEADERS = frozenset(
    (
        "authorization",
        "proxy-authorization",
        "cookie",
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
    )
)
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript", "+json", "+xml")


class HttpConnector(BuiltinConnector):
    type = "http"
    description = "Any HTTP API under one base URL with a credential (http.call), and read-only http.request."
    config_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "base_url": {"type": "string", "pattern": r"^https?://[^\s/?#]+(/[^\s?#]*)?$", "maxLength": 2048},
            "auth": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "type": {
                        "type": "string",
                        "enum": ["none", "bearer", "basic", "header"],
                        "default": "none",
                    },
                    "header": {"type": "string", "pattern": r"^[A-Za-z0-9-]{1,64}$"},
                    "prefix": {"type": "string", "maxLength": 64},
                },
            },
            "allow_hosts": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 100},
            "timeout_s": {"type": "number", "minimum": 1, "maximum": 120, "default": 30},
        },
    }
    secrets = {"token": "the credential http.call sends (bearer token, user:password, or header value)"}
    tools = (
        tool(
            "http.call",
            "Call the configured API with its credential: any method, a path under its base URL, query, "
            "headers "
            "and a JSON or text body. Needs approval.",
            properties={
                "method": {
                    "type": "string",
                    "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
                },
                "path": {"type": "string", "maxLength": 2048, "default": ""},
                "query": {
                    "type": "object",
                    "additionalProperties": {"type": ["string", "number", "boolean"]},
                },
                "headers": _HEADERS,
                "json": {},
                "body": {"type": "string", "maxLength": 1_000_000},
            },
            required=["method"],
            sensitive=True,
        ),
        tool(
            "http.request",
            "Read a public http(s) URL with GET, without any credential; returns status, content type "
            "and text.",
            properties={
                "url": {"type": "string", "pattern": r"^https?://", "maxLength": 2048},
                "headers": _HEADERS,
            },
            required=["url"],
            sensitive=False,
        ),
    )

    def __init__(self, config: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        auth = self.config.get("auth") or {}
        kind = auth.get("type", "none")
        if kind != "none" and not self.config.get("base_url"):
            raise ConnectorConfigError("config.base_url", "is required when config.auth.type is not none")
        if kind == "header" and not auth.get("header"):
            raise ConnectorConfigError("config.auth.header", "is required when config.auth.type is header")
        if kind != "none" and "token" not in self.credentials:
            raise ConnectorConfigError("credentials.token", f"auth.type {kind} needs the token secret")
        self._rest = RestClient(provider="the HTTP API", timeout_s=float(self.config["timeout_s"]))

    def offers(self, tool: str) -> bool:
        return tool != "http.call" or bool(self.config.get("base_url"))

    def _auth_headers(self, env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
        auth = self.config.get("auth") or {}
        kind = auth.get("type", "none")
        if kind == "none":
            return {}, []
        token = self.secret("token", env) or ""
        if kind == "bearer":
            return {"Authorization": f"Bearer {token}"}, [token]
        if kind == "basic":
            encoded = base64.b64encode(token.encode()).decode()
            return {"Authorization": f"Basic {encoded}"}, [token, encoded]
        return {auth["header"]: f"{auth.get('prefix', '')}{token}"}, [token]

    async def _call(self, tool: str, arguments: dict[str, Any], env: Mapping[str, str]) -> Any:
        headers = _caller_headers(arguments.get("headers") or {})
        if tool == "http.request":
            url = arguments["url"]
            self._check_host(url)
            response = await self._rest.request("GET", url, headers=headers, read=True)
            return _result(response)
        base = self.config["base_url"].rstrip("/") + "/"
        path = arguments.get("path", "").lstrip("/")
        url = urljoin(base, path)
        if origin_of(url) != origin_of(base) or not httpx.URL(url).path.startswith(httpx.URL(base).path):
            raise BuiltinToolError("invalid_arguments", "path must stay under the connector's base URL")
        auth_headers, secrets = self._auth_headers(env)
        kwargs: dict[str, Any] = {}
        if "json" in arguments:
            kwargs["json_body"] = arguments["json"]
        elif "body" in arguments:
            kwargs["content"] = arguments["body"].encode()
        method = arguments["method"]
        response = await self._rest.request(
            method,
            url,
            headers={**headers, **auth_headers},
            params=arguments.get("query"),
            read=method in ("GET", "HEAD", "OPTIONS"),
            secrets=secrets,
            **kwargs,
        )
        return _result(response)

    def _check_host(self, url: str) -> None:
        allowed = self.config.get("allow_hosts")
        host = httpx.URL(url).host
        if allowed and host not in allowed:
            raise BuiltinToolError(
                "forbidden", f"http.request may read only {', '.join(allowed)}, not {host}"
            )

    async def test_connection(self, *, env: Mapping[str, str] | None = None) -> TestResult:
        if not self.config.get("base_url"):
            return TestResult(
                ok=True, detail="http.request only: nothing to test", discovered_tools=["http.request"]
            )
        try:
            auth_headers, secrets = self._auth_headers(env or self._env)
            response = await self._rest.request(
                "HEAD", self.config["base_url"], headers=auth_headers, read=True, secrets=secrets
            )
        except BuiltinToolError as exc:
            return TestResult(ok=False, detail=f"{exc.category}: {exc.explanation}")
        return TestResult(ok=True, detail=f"the base URL answered HTTP {response.status_code}")

    async def aclose(self) -> None:
        await self._rest.aclose()

    @classmethod
    def egress(cls, config: Mapping[str, Any]) -> list[tuple[str, int]]:
        return [host_port(config["base_url"])] if config.get("base_url") else []


def _caller_headers(headers: Mapping[str, str]) -> dict[str, str]:
    for name, value in headers.items():
        if name.lower() in _RESERVED_HEADERS:
            raise BuiltinToolError(
                "invalid_arguments", f"header {name} is set by the connector, not the caller"
            )
        if any(c in name + value for c in "\r\n\0"):
            raise BuiltinToolError("invalid_arguments", f"header {name} holds a line break or NUL")
    return dict(headers)


def _result(response: httpx.Response) -> dict[str, Any]:
    content_type = response.headers.get("content-type", "")
    out: dict[str, Any] = {
        "status": response.status_code,
        "content_type": content_type,
        "truncated": bool(response.extensions.get("agent_truncated")),
    }
    if "json" in content_type:
        try:
            out["json"] = response.json()
            return out
        except ValueError:
            pass
    if not content_type or any(t in content_type for t in _TEXT_TYPES):
        out["text"] = response.content.decode("utf-8", errors="replace")
    else:
        out["bytes"] = len(response.content)
    return out
