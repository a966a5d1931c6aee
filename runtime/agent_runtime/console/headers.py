"""The headers every console response carries: a strict Content-Security-Policy and its companions.

No inline script or style, no `eval`, nothing from another origin: the page's script and stylesheet are
files of this package served from `/console/static/`, and the only connections are back to this OE.
"""

from __future__ import annotations

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "font-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)

SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-security-policy", CSP),
    ("x-content-type-options", "nosniff"),
    # same-origin, not no-referrer: with no-referrer a POST says `Origin: null`, which the CSRF check refuses.
    ("referrer-policy", "same-origin"),
    ("x-frame-options", "DENY"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
    ("permissions-policy", "camera=(), microphone=(), geolocation=()"),
)


def with_security_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """`headers` (raw ASGI) with the console's security headers set, replacing any of the same name."""
    names = {name.encode() for name, _ in SECURITY_HEADERS}
    kept = [(name, value) for name, value in headers if name.lower() not in names]
    return kept + [(name.encode(), value.encode()) for name, value in SECURITY_HEADERS]
