"""A connector's default headers from tool.yaml (an API version header, an Accept): never a secret.

A credential belongs in `auth:` (its value in a Secret, named by env); a default header is written in
tool.yaml in plain text, lands in the bundle and the catalog, and is shown to anyone who reads either. So
a header whose value comes from a secret (a mapping such as `valueFrom`/`secretKeyRef`, or `${ENV}`), whose
name is a credential's, or whose value looks like a token is refused, naming the header and the fix.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")  # an RFC 9110 token
# Headers the executor sets itself, or that carry credentials.
_RESERVED = frozenset(
    (
        "authorization",
        "proxy-authorization",
        "cookie",
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "te",
        "upgrade",
        "expect",
    )
)
_SECRET_NAME = re.compile(r"(token|secret|passw|api[-_]?key|auth|session|signature|credential)", re.I)
_SECRET_VALUE = re.compile(
    r"^(bearer|basic|token|digest)\s|^(sk|rk|pk)_(live|test)_|^gh[pousr]_|^github_pat_|^glpat-|^xox[abposr]-"
    r"|^AKIA[0-9A-Z]{12}|^eyJ[\w-]+\.[\w-]+\.|^AIza[\w-]{20}",
    re.I,
)
_FROM_ENV = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")
MAX_HEADERS = 16


def _entropy_bits(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def looks_like_secret(value: str) -> bool:
    """A known token shape, or a long random-looking run (>= 20 characters, >= 3.5 bits a character)."""
    if _SECRET_VALUE.search(value):
        return True
    for run in re.findall(r"[A-Za-z0-9+/=_-]{20,}", value):
        has_digit = any(c.isdigit() for c in run)
        has_alpha = any(c.isalpha() for c in run)
        if has_digit and has_alpha and _entropy_bits(run) >= 3.5:
            return True
    return False


def check_default_headers(
    headers: Mapping[str, Any] | None, *, credential_header: str | None = None
) -> dict[str, str] | None:
    """The headers as {lower-case name: value}, or ValueError naming `headers.<name>` and the fix."""
    if headers is None:
        return None
    if not isinstance(headers, Mapping):
        raise ValueError("headers must be a mapping of header name -> plain text value")
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"headers holds {len(headers)} entries; at most {MAX_HEADERS}")
    checked: dict[str, str] = {}
    for raw_name, value in headers.items():
        name = str(raw_name)
        where = f"headers.{name[:64]}"
        if not _NAME.match(name):
            raise ValueError(f"{where}: not a valid header name (letters, digits, - and RFC 9110 symbols)")
        lower = name.lower()
        if isinstance(value, Mapping):
            raise ValueError(
                f"{where}: a default header's value comes from tool.yaml in plain text, never from a "
                "secret; put the credential in auth: (its env names the Secret's variable)"
            )
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ValueError(f"{where}: the value must be plain text, e.g. '2022-11-28'")
        text = str(value)
        if lower in _RESERVED or (credential_header and lower == credential_header.lower()):
            raise ValueError(
                f"{where}: the connector sets {name} itself (or it carries a credential); "
                "remove it from headers (credentials go in auth:)"
            )
        if _SECRET_NAME.search(lower):
            raise ValueError(
                f"{where}: a header named like a credential is never a default header; "
                "put the credential in auth: (type api_key, in: header, name: " + name + ")"
            )
        if _FROM_ENV.search(text):
            raise ValueError(
                f"{where}: values are not expanded from the environment; a secret goes in auth:, "
                "a plain value is written as is"
            )
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text) or len(text) > 256:
            raise ValueError(f"{where}: the value must be at most 256 printable characters on one line")
        if looks_like_secret(text):
            raise ValueError(
                f"{where}: the value looks like a credential (a token shape or a long random string); "
                "a secret never belongs in tool.yaml: put it in auth: with its env"
            )
        checked[lower] = text
    return checked or None
