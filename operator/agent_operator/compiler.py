"""Catalog compiling off the event loop, in a worker process with a time and a memory limit.

A catalog is user input: a kilobyte of YAML aliases or `$ref` fan-out can cost gigabytes and minutes. The
connector core bounds what it knows to be expensive; this is the backstop for the rest. Compiling in the
operator's own process would freeze every other Agent's reconcile, and an out-of-memory kill would take the
operator down. The worker has an address-space limit (RLIMIT_AS) of its start-up size plus a budget; a
compile over its time is ended by killing the worker. Results are cached by connector name and text digest,
so a resync or a second Agent using the same Connector compiles nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import multiprocessing
import resource
from collections import OrderedDict
from concurrent.futures.process import BrokenProcessPool

from agent_operator.bundle import compile_catalog_text
from agent_operator.inputs import CatalogFailure, CatalogKey, catalog_key
from agent_runtime.connectors import ToolDefinitions

log = logging.getLogger("agent_operator")

Compiled = ToolDefinitions | CatalogFailure


def _limit_memory(budget_bytes: int) -> None:
    """Worker initializer: everything imported, cap the address space at today's size plus the budget."""
    import agent_operator.bundle  # noqa: F401 - imported before the limit, so the budget is for compiling

    with open("/proc/self/status") as status:
        size_kib = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    limit = size_kib * 1024 + budget_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _ready() -> bool:
    return True


def _compile(text: str, connector_name: str, budget_bytes: int) -> Compiled:
    try:
        return compile_catalog_text(text, connector_name=connector_name)
    except MemoryError:
        return CatalogFailure(
            reason="CatalogTooComplex", detail=f"compiling it needs more than {budget_bytes >> 20} MiB"
        )


class CatalogCompiler:
    """Compiles catalogs in one worker process; `seconds` 0 compiles inline (no worker, no limits)."""

    def __init__(
        self,
        *,
        seconds: float,
        memory_bytes: int,
        cache_entries: int = 1024,
        cache_text_bytes: int = 32 << 20,
    ) -> None:
        self.seconds = seconds
        self.memory_bytes = memory_bytes
        # Bounded by count and by the size of the documents behind the entries (a compiled catalog is
        # smaller than its document), least recently used first out.
        self.cache_entries = cache_entries
        self.cache_text_bytes = cache_text_bytes
        self._cache: OrderedDict[CatalogKey, tuple[Compiled, int]] = OrderedDict()
        self._cached_bytes = 0
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._lock = asyncio.Lock()  # one compile at a time: the worker is one process
        self._broken = False  # the worker could not start: compile inline
        self.compiles = 0

    def _cached(self, key: CatalogKey) -> Compiled | None:
        found = self._cache.get(key)
        if found is None:
            return None
        self._cache.move_to_end(key)
        return found[0]

    async def compile(self, text: str, *, connector_name: str) -> Compiled:
        key = catalog_key(connector_name, text)
        if (found := self._cached(key)) is not None:
            return found
        async with self._lock:
            if (found := self._cached(key)) is not None:
                return found
            result = await self._run(text, connector_name)
            self.compiles += 1
        self._cache[key] = (result, len(text))
        self._cached_bytes += len(text)
        while len(self._cache) > 1 and (
            len(self._cache) > self.cache_entries or self._cached_bytes > self.cache_text_bytes
        ):
            self._cached_bytes -= self._cache.popitem(last=False)[1][1]
        return result

    async def _run(self, text: str, connector_name: str) -> Compiled:
        if self.seconds <= 0:
            return compile_catalog_text(text, connector_name=connector_name)
        for attempt in (1, 2):  # a worker that died for another reason gets one fresh try
            pool = await self._ensure_pool()
            if pool is None:  # no worker can start here: compile inline rather than not at all
                return compile_catalog_text(text, connector_name=connector_name)
            future = asyncio.get_running_loop().run_in_executor(
                pool, _compile, text, connector_name, self.memory_bytes
            )
            try:
                return await asyncio.wait_for(future, self.seconds)
            except TimeoutError:
                self._kill_pool()
                return CatalogFailure(
                    reason="CatalogTooComplex", detail=f"compiling it takes more than {self.seconds:g}s"
                )
            except BrokenProcessPool:
                self._kill_pool()
                if attempt == 2:
                    break
        return CatalogFailure(
            reason="CatalogTooComplex",
            detail=f"the compiler process died on it (more than {self.memory_bytes >> 20} MiB?)",
        )

    async def _ensure_pool(self) -> concurrent.futures.ProcessPoolExecutor | None:
        if self._pool is None and not self._broken:
            # spawn: a fresh interpreter, not a fork of an event loop with threads and open sockets.
            pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_limit_memory,
                initargs=(self.memory_bytes,),
            )
            try:
                await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(pool, _ready), 60)
            except (BrokenProcessPool, TimeoutError, OSError) as exc:
                pool.shutdown(wait=False, cancel_futures=True)
                self._broken = True
                log.error(
                    "the catalog compiler process cannot start; compiling in the operator's own process",
                    extra={"error": f"{type(exc).__name__}: {exc}"[:300]},
                )
                return None
            self._pool = pool
        return self._pool

    def _kill_pool(self) -> None:
        """End a worker stuck on a compile; the next compile starts a fresh one."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            with contextlib.suppress(ProcessLookupError, AttributeError):
                process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        log.warning("catalog compiler restarted after a compile over its limits")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
