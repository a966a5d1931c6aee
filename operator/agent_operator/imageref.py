"""Is a string a valid container image reference (the distribution reference grammar)?"""

from __future__ import annotations

import re

# domain[:port]/ path components, then :tag and/or @digest (github.com/distribution/reference).
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_PATH = rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_DOMAIN_RE = re.compile(rf"^{_DOMAIN}$")
_REMAINDER_RE = re.compile(rf"^{_PATH}(?::{_TAG})?(?:@{_DIGEST})?$")
_MAX_NAME = 255


def image_reference_problem(image: str) -> str | None:
    """None for a valid reference, else what is wrong with it (for a condition message)."""
    if not image or image != image.strip():
        return "it is empty or has surrounding whitespace"
    head, slash, rest = image.partition("/")
    # As docker does: the first component is a registry only if it looks like a host.
    has_domain = bool(slash) and ("." in head or ":" in head or head == "localhost" or head.startswith("["))
    domain_ok = not has_domain or bool(_DOMAIN_RE.match(head))
    if not domain_ok or not _REMAINDER_RE.match(rest if has_domain else image):
        return (
            "it does not follow the image reference grammar "
            "(registry/path/name:tag or ...@sha256:<hex>, lower-case path)"
        )
    name = image.split("@", 1)[0].rsplit(":", 1)[0] if ":" in image.split("/")[-1] else image.split("@", 1)[0]
    if len(name) > _MAX_NAME:
        return f"the repository name is longer than {_MAX_NAME} characters"
    return None
