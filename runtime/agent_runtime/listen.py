"""Which host a runtime component listens on, and what every request must be before a route sees it."""

from __future__ import annotations

import asyncio
import functools
import json
import math
import re
import socket
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DUAL_STACK_HOST = "::"
IPV4_HOST = "0.0.0.0"  # noqa: S104 - pods must accept traffic on every interface


def dual_stack_available() -> bool:
    """True when the kernel has IPv6 and a socket with IPV6_V6ONLY=0 can be bound."""
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind((DUAL_STACK_HOST, 0))
    except OSError:
        return False
    return True


def choose_listen_host(*, app_host: str | None, dual_stack: bool) -> str:
    """`APP_HOST` wins; otherwise dual stack when the kernel allows it, else IPv4 on every interface."""
    if app_host and app_host.strip():
        return app_host.strip()
    return DUAL_STACK_HOST if dual_stack else IPV4_HOST


def resolve_listen_host(env: Mapping[str, str]) -> str:
    """Probe only when APP_HOST does not decide."""
    app_host = env.get("APP_HOST")
    if app_host and app_host.strip():
        return choose_listen_host(app_host=app_host, dual_stack=False)
    return choose_listen_host(app_host=None, dual_stack=dual_stack_available())


def bind_listener(host: str, port: int, *, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket; the IPv6 wildcard is made dual stack explicitly, not left to the sysctl."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and host == DUAL_STACK_HOST:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock


# Every component's requests, checked before any route sees them (issue 27): a body must arrive within a
# deadline, and JSON nesting is bounded before a parser's recursion can fail on it.
BODY_TIMEOUT_ENV = "BODY_TIMEOUT_S"
DEFAULT_BODY_TIMEOUT_S = 10.0
MAX_JSON_DEPTH = 64
# The largest body cap any route has; past it the route's own cap answers 413, so buffering stops there.
MAX_BUFFERED_BODY_BYTES = 8 * 1024 * 1024
# Naming the field of a too-deep body walks the strings before it; past this many, it is "(body)".
_MAX_STRINGS_WALKED = 100_000

# A JSON string: its brackets are text, not structure.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_MAX_INT64 = 2**63 - 1
# A cheap first look (C-speed translate and substring tests) for numbers that may be out of range:
# 19 digits in a row, or an exponent of 3 digits.
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_EXPONENT = re.compile(rb"[eE][+-]?[0-9]{3}")
# In a body whose strings are blanked: NaN/Infinity, numbers of 19+ integer digits, 3+ exponent digits.
_NUMBER_SUSPECT = re.compile(
    rb"-?(?:NaN|Infinity)"
    rb"|(?<![\d.eE+-])-?\d{19,}(?:\.\d+)?(?:[eE][+-]?\d+)?"
    rb"|(?<![\d.eE+-])-?\d+(?:\.\d+)?[eE][+-]?\d{3,}"
)


def body_timeout_from_env(env: Mapping[str, str]) -> float:
    """BODY_TIMEOUT_S (seconds, default 10); a malformed value is refused with the fix."""
    raw = env.get(BODY_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_BODY_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise ValueError(f"{BODY_TIMEOUT_ENV}={raw!r} is not a number of seconds; use 0.1-3600 or unset it")
    return value


def json_edge_problem(raw: bytes, *, limit: int = MAX_JSON_DEPTH) -> dict[str, str] | None:
    """`{field, problem}` for JSON no store can hold, else None: arrays and objects nested deeper than
    `limit`, `NaN` or `Infinity` (not JSON, yet Python's and pydantic's parsers take them), a number that
    overflows a double (1e400), or an integer outside signed 64 bits. Malformed JSON is the parser's to name.

    Pure and linear. A clean body costs a few C-speed passes (bytes.replace, split and join) that leave what
    is outside its strings, then a few over that; only a body that fails (or looks as if it may) is walked
    again exactly, to name `field`: the top-level key holding the bad part.
    """
    # Only `\\` and `\"` can hide a quote; once they are gone, quotes pair up and every other piece
    # between them is outside strings (structure, numbers, literals, whitespace).
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in raw else raw
    view = b"".join(unescaped.split(b'"')[::2])
    deep = view.count(b"[") + view.count(b"{") > limit and _max_depth(view) > limit
    # Outside strings a capital N or I is only NaN or Infinity; digits and exponents are numbers.
    suspect = b"N" in view or b"I" in view
    if not suspect:
        # (`in` over a run of zeros is slow for a needle ending in one, so the exponent test waits for an e.)
        suspect = b"0" * 19 in view.translate(_DIGITS_AS_ZERO) or (
            (b"e" in view or b"E" in view) and _EXPONENT.search(view) is not None
        )
    if not deep and not suspect:
        return None
    import numpy as np  # only bodies that fail, or look as if they may, get here

    stripped = _STRING.sub(b'""', raw)
    codes = np.frombuffer(stripped, dtype=np.uint8)
    depth = np.cumsum(_steps()[codes])
    found: tuple[int, str] | None = None
    if deep:
        over = np.flatnonzero(depth > limit)
        if over.shape[0]:
            found = (int(over[0]), f"nested deeper than {limit} levels of arrays and objects; flatten it")
    if suspect:
        for match in _NUMBER_SUSPECT.finditer(stripped, 0, len(stripped) if found is None else found[0]):
            problem = _number_problem(match.group())
            if problem is not None:
                found = (match.start(), problem)
                break
    if found is None:
        return None
    at, problem = found
    return {"field": _top_level_key(raw, stripped, codes, depth, at), "problem": problem}


def _max_depth(view: bytes) -> int:
    """How deep the brackets of a strings-free view nest."""
    import numpy as np

    return int(np.cumsum(_steps()[np.frombuffer(view, dtype=np.uint8)]).max())


def _number_problem(token: bytes) -> str | None:
    if token.lstrip(b"-") in (b"NaN", b"Infinity"):
        return "NaN and Infinity are not JSON numbers; send a finite number or null"
    if not any(c in token for c in b".eE"):
        if not -_MAX_INT64 - 1 <= int(token) <= _MAX_INT64:
            return "an integer outside signed 64 bits (-2**63 to 2**63-1); send a smaller number"
        return None
    if math.isinf(float(token)):
        return "a number too large for a double; send a smaller number"
    return None


def _top_level_key(raw: bytes, stripped: bytes, codes: Any, depth: Any, at: int) -> str:
    """The key of the top-level object member that holds position `at` of `stripped`, or "(body)"."""
    import numpy as np

    if not stripped.lstrip().startswith(b"{"):
        return "(body)"
    colons = np.flatnonzero((codes[:at] == ord(":")) & (depth[:at] == 1))
    if colons.shape[0] == 0:
        return "(body)"
    # Strings are `""` in `stripped`: the key before that colon is string number quotes/2 - 1 of `raw`.
    index = stripped.count(b'"', 0, int(colons[-1])) // 2 - 1
    if not 0 <= index < _MAX_STRINGS_WALKED:
        return "(body)"
    for number, match in enumerate(_STRING.finditer(raw)):
        if number == index:
            try:
                key = json.loads(match.group())
            except ValueError:
                return "(body)"
            return str(key)[:64] or "(body)"
    return "(body)"


def _problem_body(error: str, field: str, problem: str) -> bytes:
    # Both shapes the components answer with: the OE's `detail` list and the Memory server's `error` code.
    return json.dumps({"error": error, "detail": [{"field": field, "problem": problem}]}).encode()


async def _send_json(send: Send, status: int, body: bytes) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),  # the rest of a late or refused body is not read
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyGuard:
    """ASGI middleware: the whole body within `timeout_s` (else 408), and JSON at most `max_depth` deep
    (else 400 naming the field), before the app runs. The body is buffered (up to `buffer_limit`, the
    largest route cap; a larger one is passed on for the route's own 413) and handed on as one message."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
        max_depth: int = MAX_JSON_DEPTH,
        buffer_limit: int = MAX_BUFFERED_BODY_BYTES,
    ) -> None:
        self.app = app
        self.timeout_s = timeout_s
        self.max_depth = max_depth
        self.buffer_limit = buffer_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        try:
            async with asyncio.timeout(self.timeout_s):
                while more and size <= self.buffer_limit:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return  # the client left; nobody to answer
                    chunk = message.get("body", b"")
                    chunks.append(chunk)
                    size += len(chunk)
                    more = bool(message.get("more_body", False))
        except TimeoutError:
            problem = f"the request body did not arrive within {self.timeout_s:g} s; send it whole"
            await _send_json(send, 408, _problem_body("body_timeout", "(body)", problem))
            return
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if not more:
            nesting = json_edge_problem(body, limit=self.max_depth)
            if nesting is not None:
                error = _problem_body("invalid_request", nesting["field"], nesting["problem"])
                await _send_json(send, 400, error)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": more}

        await self.app(scope, replay, send)


@functools.cache
def _steps() -> Any:
    """+1 for an opening bracket, -1 for a closing one, 0 for any other byte (numpy, made once)."""
    import numpy as np

    steps = np.zeros(256, dtype=np.int32)
    steps[[ord("["), ord("{")]] = 1
    steps[[ord("]"), ord("}")]] = -1
    return steps
