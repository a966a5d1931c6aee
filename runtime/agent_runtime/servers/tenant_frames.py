"""The frames the Tool Pod and its tenant tool workers exchange: 4-byte big-endian length, then JSON."""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

MAX_FRAME_BYTES = 64 * 1024 * 1024  # above the Tool Pod's body and result caps
_HEADER = struct.Struct(">I")


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next frame, or None at end of stream."""
    try:
        header = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {size} bytes is over {MAX_FRAME_BYTES}")
    try:
        data = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        return None
    frame = json.loads(data)
    if not isinstance(frame, dict):
        raise ValueError("a frame must be a JSON object")
    return frame


def encode_frame(frame: dict[str, Any]) -> bytes:
    data = json.dumps(frame, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    return _HEADER.pack(len(data)) + data
