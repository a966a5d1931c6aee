"""Removing known secret values from text before it reaches a log line or an error message."""

from __future__ import annotations

from collections.abc import Iterable

REDACTED = "[REDACTED]"
# Very short values (e.g. "1", "on") would shred ordinary text and are not credentials anyway.
_MIN_SECRET_LENGTH = 4


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of each secret value, longest first so overlapping values vanish whole."""
    for value in sorted({s for s in secrets if len(s) >= _MIN_SECRET_LENGTH}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text
