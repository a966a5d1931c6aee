"""Turning a failed tool call into a category and an explanation that is safe to show an agent or a person."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Literal

import httpx
from pydantic import BaseModel

from agent_runtime.connectors.errors import CredentialMissingError, ToolArgumentError, UnknownToolError
from agent_runtime.redaction import redactor_for

Category = Literal[
    "auth", "forbidden", "not_found", "rate_limited", "timeout", "connection", "client_error", "server_error"
]
EXPLANATION_LIMIT = 300
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]|\x1b\[[0-9;]*[A-Za-z]")
_URL_SHAPED = re.compile(r"(?i)\b(?:[a-z][a-z0-9+.-]*://|www\.)\S*")
_MESSAGE_KEYS = (
    "message",
    "error_description",
    "detail",
    "title",
    "error",
    "errorMessages",
    "errors",
    "reason",
)
_GENERIC = {
    "auth": "the provider rejected the credential",
    "forbidden": "the credential is not allowed to do this",
    "not_found": "the provider has no such resource",
    "rate_limited": "the provider is rate limiting requests",
    "timeout": "the provider did not answer in time",
    "connection": "the provider could not be reached",
    "client_error": "the provider rejected the request",
    "server_error": "the provider failed to handle the request",
}


class ToolApiError(BaseModel):
    category: Category
    status_code: int | None = None
    explanation: str


def classify_tool_api_error(exc: BaseException, *, secrets: Iterable[str] = ()) -> ToolApiError:
    """Category from the status or exception type; explanation from the kept body, sanitized."""
    secret_values = [s for s in secrets if s]
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        category = _status_category(status)
        detail = _body_message(exc.response)
        if 300 <= status < 400:
            detail = detail or "redirect refused: the connector follows redirects only to its own origin"
        text = _sanitize(detail, secret_values)
        explanation = f"HTTP {status}: {_GENERIC[category]}" + (f": {text}" if text else "")
        return ToolApiError(category=category, status_code=status, explanation=_bound(explanation))
    if isinstance(exc, httpx.TimeoutException):
        return ToolApiError(category="timeout", explanation=_GENERIC["timeout"])
    if isinstance(exc, httpx.DecodingError):
        return ToolApiError(
            category="server_error", explanation="the provider sent a body that cannot be decoded"
        )
    if isinstance(exc, httpx.TransportError):
        return ToolApiError(category="connection", explanation=_GENERIC["connection"])
    if isinstance(exc, CredentialMissingError):
        return ToolApiError(category="auth", explanation=_bound(_sanitize(str(exc), secret_values)))
    if isinstance(exc, ToolArgumentError | UnknownToolError):
        return ToolApiError(category="client_error", explanation=_bound(_sanitize(str(exc), secret_values)))
    return ToolApiError(category="server_error", explanation=f"tool call failed ({type(exc).__name__})")


def _status_category(status: int) -> Category:
    if status == 401:
        return "auth"
    if status == 403:
        return "forbidden"
    if status in (404, 410):
        return "not_found"
    if status == 429:
        return "rate_limited"
    if status in (408, 504):
        return "timeout"
    if status >= 500:
        return "server_error"
    return "client_error"


def _body_message(response: httpx.Response) -> str:
    try:
        raw = response.content[:4096]
    except httpx.ResponseNotRead:
        return ""
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        return ""
    try:
        return _message_from(json.loads(text)) or ""
    except ValueError:
        return "" if text.lstrip().startswith("<") else text  # an HTML error page says nothing useful


def _message_from(data: Any, depth: int = 0) -> str | None:
    if depth > 4:
        return None
    if isinstance(data, str):
        return data
    if isinstance(data, list):
        return next((m for m in (_message_from(item, depth + 1) for item in data[:3]) if m), None)
    if isinstance(data, dict):
        for key in _MESSAGE_KEYS:
            if key in data:
                found = _message_from(data[key], depth + 1)
                if found:
                    return found
    return None


def _sanitize(text: str, secrets: list[str]) -> str:
    text = redactor_for(secrets).text(text)
    text = _CONTROL.sub("", text)
    text = _URL_SHAPED.sub("[link removed]", text)
    return " ".join(text.split())


def _bound(text: str) -> str:
    return text if len(text) <= EXPLANATION_LIMIT else text[: EXPLANATION_LIMIT - 1].rstrip() + "…"
