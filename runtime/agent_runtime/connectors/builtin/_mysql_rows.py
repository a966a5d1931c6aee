"""Rows of an unbuffered MySQL result read off the wire with every cell cut as it arrives.

pymysql reads each row packet whole, so ten rows of 30 MiB cells cost 300 MiB before any cut. Here a row
packet is parsed as it streams in: each cell's length comes first, at most `cut_bytes` of it are kept and
the rest is read in small pieces and dropped. Memory per row is bounded by `cut_bytes` per cell whatever
the server holds. The connection is closed after the call (the connector opens a fresh one per call), so
an unread remainder never reaches another caller.
"""

from __future__ import annotations

import struct
from typing import Any

_MAX_PACKET = 0xFFFFFF
_DROP_PIECE = 64 * 1024


class _Packet:
    """One logical packet (possibly split into 16 MiB physical ones), read a few bytes at a time."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.left = 0
        self._continued = True
        self.first_length = -1

    async def _next_physical(self) -> None:
        header = await self._conn._read_bytes(4)
        low, high, seq = struct.unpack("<HBB", header)
        length = low + (high << 16)
        if seq != self._conn._next_seq_id:
            self._conn.close()
            raise ConnectionError("MySQL packet sequence out of order")
        self._conn._next_seq_id = (seq + 1) % 256
        self.left = length
        self._continued = length == _MAX_PACKET
        if self.first_length < 0:
            self.first_length = length

    async def start(self) -> None:
        await self._next_physical()

    async def read(self, n: int) -> bytes:
        parts: list[bytes] = []
        while n > 0:
            if self.left == 0:
                if not self._continued:
                    raise ConnectionError("MySQL row packet ended early")
                await self._next_physical()
                continue
            take = min(n, self.left)
            parts.append(await self._conn._read_bytes(take))
            self.left -= take
            n -= take
        return b"".join(parts)

    async def drop(self, n: int) -> None:
        while n > 0:
            piece = min(n, _DROP_PIECE)
            await self.read(piece)
            n -= piece

    async def rest(self) -> bytes:
        parts = [await self.read(self.left)]
        while self._continued:
            await self._next_physical()
            parts.append(await self.read(self.left))
        return b"".join(parts)


async def _length(packet: _Packet) -> int | None:
    return await _length_from((await packet.read(1))[0], packet)


async def read_row(
    conn: Any, converters: list[tuple[str | None, Any]], *, cut_bytes: int
) -> tuple[Any, ...] | None:
    """The next row with each cell cut to `cut_bytes`, or None at the end of the result."""
    import pymysql

    packet = _Packet(conn)
    await packet.start()
    head = await packet.read(1)
    if head[0] == 0xFE and packet.first_length < 9:
        await packet.rest()
        return None
    if head[0] == 0xFF:
        pymysql.err.raise_mysql_exception(head + await packet.rest())
    # `head` was the first cell's length byte (or NULL marker): parse it as such.
    cells: list[Any] = []
    for index, (encoding, converter) in enumerate(converters):
        length = await (_length_from(head[0], packet) if index == 0 else _length(packet))
        if length is None:
            cells.append(None)
            continue
        keep = min(length, cut_bytes)
        data = await packet.read(keep)
        await packet.drop(length - keep)
        if length > keep:
            # Cut: the text as far as it came (a split character dropped), never handed to a converter.
            cells.append(data.decode(encoding, errors="ignore") + "…" if encoding else data)
            continue
        value: Any = data.decode(encoding) if encoding else data
        cells.append(converter(value) if converter is not None else value)
    await packet.rest()  # nothing should be left; never leave a partial packet on the wire
    return tuple(cells)


async def _length_from(first: int, packet: _Packet) -> int | None:
    if first < 0xFB:
        return first
    if first == 0xFB:
        return None
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
    return int.from_bytes(await packet.read(size), "little")
