"""A loopback TCP proxy the test controls, between one OE replica and PostgreSQL: a network partition.

`cut("drop")` resets every open connection and refuses new ones (the peer is gone); `cut("blackhole")`
keeps connections open and new ones accepted but forwards nothing either way (packets lost: the client
learns only from its own timeouts); `heal()` resets what is open (a stream that lost bytes cannot carry
on) and forwards new connections again.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Literal

from tests.conftest import free_port

CutMode = Literal["drop", "blackhole"]


class PartitionProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.mode: CutMode | None = None
        self._epoch = 0  # a connection forwards only within the epoch it was opened in
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._serve, name="pg-partition", daemon=True)

    def start(self) -> PartitionProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the partition proxy did not start")
        return self

    def stop(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)

    def cut(self, mode: CutMode) -> None:
        done = threading.Event()

        def apply() -> None:
            self.mode = mode
            self._epoch += 1
            if mode == "drop":
                for writer in list(self._writers):
                    with contextlib.suppress(Exception):
                        writer.transport.abort()
            done.set()

        self._loop.call_soon_threadsafe(apply)
        done.wait(5)

    def heal(self) -> None:
        done = threading.Event()

        def apply() -> None:
            self.mode = None
            self._epoch += 1
            for writer in list(self._writers):
                with contextlib.suppress(Exception):
                    writer.transport.abort()
            done.set()

        self._loop.call_soon_threadsafe(apply)
        done.wait(5)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._client, "127.0.0.1", self.port)
        self._ready.set()
        async with server:
            await self._stop.wait()
            for writer in list(self._writers):
                writer.transport.abort()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "drop":
            writer.transport.abort()
            return
        epoch = self._epoch
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(self._pipe(reader, up_writer, epoch), self._pipe(up_reader, writer, epoch))
        finally:
            self._writers.difference_update((writer, up_writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, epoch: int) -> None:
        try:
            while data := await reader.read(65536):
                if self.mode is not None or self._epoch != epoch:
                    continue  # lost on the way
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.transport.abort()
