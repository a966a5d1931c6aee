"""What the audit log may keep of a call: arguments and results with secrets taken out (OE-08, B-19).

Two rules: any value equal to a known secret (every Agent's runtime token) is replaced, and the value of
any field whose name says it holds a credential is masked, at any depth. Large values are cut.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from typing import Any

from agent_runtime.redaction import REDACTED, redact

_SECRET_FIELD = re.compile(
    r"(?i)(pass(word|wd|phrase)?|secret|token|api[-_]?key|apikey|auth(orization)?|credential|"
    r"private[-_]?key|session[-_]?key|cookie|signing[-_]?key)"
)
# Token counts are not credentials: a model's usage (`token_usage`, `usage_metadata`, `input_tokens`,
# `prompt_tokens_details`...) stays readable in the audit.
_USAGE_FIELD = re.compile(
    r"(?i)^(token_usage|usage_metadata|(input|output|total|prompt|completion|cached|reasoning)_tokens"
    r"(_details)?|(input|output)_token_details)$"
)
# The audit keeps what a reviewer needs, not whole payloads: a larger value becomes a size note.
MAX_AUDIT_VALUE_BYTES = 16 * 1024


def redact_value(value: Any, *, secrets: Iterable[str]) -> Any:
    """A copy of `value` with known secret values replaced and credential-named fields masked."""
    known = tuple(secrets)

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            return {
                key: REDACTED if _credential_named(str(key)) else walk(inner) for key, inner in item.items()
            }
        if isinstance(item, list | tuple):
            return [walk(inner) for inner in item]
        if isinstance(item, str):
            return redact(item, known)
        return item

    return walk(value)


@functools.lru_cache(maxsize=4096)  # the same few field names, audited at every step
def _credential_named(key: str) -> bool:
    return bool(_SECRET_FIELD.search(key)) and not _USAGE_FIELD.match(key)


def audit_value(value: Any, *, secrets: Iterable[str]) -> Any:
    """`redact_value`, then cut to MAX_AUDIT_VALUE_BYTES (a note with the size replaces a larger value)."""
    cleaned = redact_value(value, secrets=secrets)
    size = len(json.dumps(cleaned, default=str))
    if size > MAX_AUDIT_VALUE_BYTES:
        return {"truncated": True, "bytes": size}
    return cleaned
