"""Per-call HTTP policy decisions: budget, retries, redirects, response caps. Pure functions."""

from __future__ import annotations

import email.utils
import time
from urllib.parse import urljoin

import httpx

from agent_runtime.connectors.wire import origin_of

CALL_BUDGET_S = 30.0
MAX_RESPONSE_BYTES = 200_000
MAX_ERROR_BODY_BYTES = 4096
MAX_RETRIES = 3
MAX_RETRY_WAIT_S = 30.0
MAX_REDIRECTS = 5
RETRY_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))
RETRY_STATUSES = frozenset((429, 503))
REDIRECT_STATUSES = frozenset((301, 302, 303, 307, 308))
_DEFAULT_BACKOFF_S = (0.5, 1.0, 2.0)


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """Retry-After as seconds (delta or HTTP date), capped at 30; None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return min(float(text), MAX_RETRY_WAIT_S)
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment is None:
        return None
    wall = time.time() if now is None else now
    return min(max(moment.timestamp() - wall, 0.0), MAX_RETRY_WAIT_S)


def retry_wait(*, method: str, status: int, retry_after: str | None, attempt: int) -> float | None:
    """Seconds to wait before retrying, or None when this response must not be retried."""
    if method not in RETRY_METHODS or status not in RETRY_STATUSES or attempt >= MAX_RETRIES:
        return None
    wait = retry_after_seconds(retry_after)
    return _DEFAULT_BACKOFF_S[attempt] if wait is None else wait


def redirect_method(method: str, status: int) -> str:
    """The method after a redirect, as browsers and httpx do it."""
    if status == 303 and method != "HEAD":
        return "GET"
    if status in (301, 302) and method == "POST":
        return "GET"
    return method


def same_origin_target(current_url: str, location: str) -> str | None:
    """The absolute redirect target when it stays on the current origin, else None."""
    target = urljoin(current_url, location.strip())
    if origin_of(target) != origin_of(current_url):
        return None
    return str(httpx.URL(target))  # percent-encoded as it goes on the wire, whatever the Location held
