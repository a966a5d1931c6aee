"""What a `step_finished` event tells the client of the step's result: its result (or error) after the same
redaction as the audit (known secrets out, credential-named fields masked), cut to a size cap with a
`truncated` flag. An execution whose results are sensitive (`step_results: false` on /invoke, or the OE's
`OE_STEP_RESULTS=off`) gets the status alone."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agent_runtime.oe.audit import redact_value
from agent_runtime.protocol import CallError

DEFAULT_MAX_BYTES = 16 * 1024


def step_content(
    *,
    result: Any,
    error: CallError | None,
    secrets: Iterable[str],
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> dict[str, Any]:
    """`{"result": ..., "truncated": bool}` or `{"error": {...}, "truncated": bool}` for the event's data.

    A result larger than `max_bytes` (as JSON) is replaced by its first `max_bytes` of JSON text, so a
    client still sees its beginning; `truncated` says so, `bytes` gives the whole size."""
    known = tuple(secrets)
    if error is not None:
        cleaned: Any = redact_value(error.model_dump(mode="json"), secrets=known)
        key = "error"
    else:
        cleaned = redact_value(result, secrets=known)
        key = "result"
    text = json.dumps(cleaned, default=str, ensure_ascii=False, separators=(",", ":"))
    size = len(text.encode("utf-8"))
    if size <= max_bytes:
        return {key: cleaned, "truncated": False}
    head = text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")
    return {key: head, "truncated": True, "bytes": size}
