"""Path parameters that may carry slashes (file paths, git refs, `{base}...{head}`).

A vendor marks them (`x-multi-segment: true`, GitHub's spelling) or describes them. Such a value is sent
segment by segment, each segment percent-encoded, so `docs/a b.md` becomes `docs/a%20b.md`; a `.` or
`..` segment (which a URL parser would resolve into another operation) and an empty one are refused.
Every other path parameter keeps `/` encoded as `%2F` (wire.path_text).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from agent_runtime.connectors.errors import ToolArgumentError

_MARKERS = ("x-multi-segment", "x-multiSegment", "x-allow-slashes")
# How documents describe a value with slashes when they do not mark it.
_DESCRIBED = re.compile(
    r"\bfile ?path\b|\bpath (?:to|of) the (?:file|directory|folder)\b|\bgit ref(?:erence)?\b"
    r"|\bfully qualified (?:git )?ref\b|\bBASE\.\.\.HEAD\b|\{base\}\.\.\.\{head\}",
    re.IGNORECASE,
)


def is_multi_segment(param: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> bool:
    """True for a path parameter marked `x-multi-segment: true` (on it or its schema) or described as
    a file path, a git ref or a `BASE...HEAD` range."""
    for source in (param, schema or {}):
        if any(source.get(marker) is True for marker in _MARKERS):
            return True
    texts = [param.get("description"), (schema or {}).get("description")]
    return any(isinstance(text, str) and _DESCRIBED.search(text) for text in texts)


def multi_segment_text(text: str, *, name: str) -> str:
    """The value as path segments, each percent-encoded; dot and empty segments refused."""
    segments = text.split("/")
    for segment in segments:
        if segment in (".", ".."):
            raise ToolArgumentError(
                f"path argument {name!r} has a {segment!r} segment, which would reach another path; "
                "give the path without . or .. segments"
            )
        if not segment:
            raise ToolArgumentError(
                f"path argument {name!r} has an empty segment (a leading, trailing or doubled '/'); "
                "remove the extra '/'"
            )
    return "/".join(quote(segment, safe="") for segment in segments)
