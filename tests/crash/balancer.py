"""A loopback TCP balancer in front of OE replicas, as a Service would be: each new connection goes to the
first upstream that accepts it (the primary while it is up, else the next), and a connection whose
upstream dies is closed, so its client sees the loss and connects again.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Sequence

from tests.conftest import free_port

_CONNECT_TIMEOUT_S = 0.5


class Balancer:
    def __init__(self, upstreams: Sequence[int]) -> None:
        self.upstreams = list(upstreams)
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._serve, name="oe-balancer", daemon=True)
        self.connections: dict[int, int] = dict.fromkeys(self.upstreams, 0)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the balancer did not start")

    def stop(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._client, "127.0.0.1", self.port)
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = None
        for port in self.upstreams:
            with contextlib.suppress(OSError, TimeoutError):
                upstream = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port), timeout=_CONNECT_TIMEOUT_S
                )
                self.connections[port] += 1
                break
        if upstream is None:
            writer.close()
            return
        up_reader, up_writer = upstream
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


@contextlib.contextmanager
def running_balancer(upstreams: Sequence[int]) -> Iterator[Balancer]:
    balancer = Balancer(upstreams)
    balancer.start()
    try:
        yield balancer
    finally:
        balancer.stop()
