"""Reading request bodies under a size cap, and the answers for a body that is too large or malformed."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request

from agent_runtime.protocol import validation_problems
from agent_runtime.servers.auth import Receive

# Tool arguments, model messages and execution inputs are JSON; anything larger is a mistake or an attack.
MAX_BODY_BYTES = 8 * 1024 * 1024


async def read_asgi_body(receive: Receive, *, limit: int) -> bytes | None:
    """The whole request body from raw ASGI messages, or None once it exceeds `limit`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def read_request_body(request: Request, *, limit: int) -> bytes | None:
    """The whole body of a Starlette request, or None once it exceeds `limit` (read no further)."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def too_large(limit: int) -> dict[str, Any]:
    """The 413 body."""
    return {"detail": [{"field": "(body)", "problem": f"larger than {limit} bytes"}]}


def malformed(exc: ValidationError) -> dict[str, Any]:
    """The 400/422 body: each bad field and its problem, never the offending input."""
    return {"detail": validation_problems(exc)}


def dumps(payload: Any) -> bytes:
    return json.dumps(payload).encode()
