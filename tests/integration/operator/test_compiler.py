"""The operator's catalog compiler: a real worker process, its time and memory limits, its cache, and an
event loop that keeps running while it works."""

from __future__ import annotations

import asyncio
import json

from agent_operator.compiler import CatalogCompiler
from agent_operator.inputs import CatalogFailure
from agent_runtime.connectors import ToolDefinitions


def big_document(operations: int) -> str:
    paths = {
        f"/things{i}/{{id}}": {
            "get": {
                "operationId": f"getThing{i}",
                "description": "Lorem ipsum dolor sit amet. " * 12,
                "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "ok"}},
            }
        }
        for i in range(operations)
    }
    return json.dumps({"openapi": "3.0.3", "info": {"title": "Big", "version": "1"}, "paths": paths})


async def _ticks_while(work: asyncio.Future) -> int:
    ticks = 0
    while not work.done():
        await asyncio.sleep(0.01)
        ticks += 1
    return ticks


def test_compiles_in_a_worker_while_the_loop_runs_and_caches_by_text() -> None:
    async def run() -> None:
        compiler = CatalogCompiler(seconds=60, memory_bytes=256 << 20)
        try:
            work = asyncio.ensure_future(compiler.compile(big_document(3000), connector_name="big"))
            ticks = await _ticks_while(work)
            catalog = work.result()
            assert isinstance(catalog, ToolDefinitions) and len(catalog.tools) == 3000
            assert ticks >= 2  # the loop went on while the compile was pending (inline, it would not)
            again = await compiler.compile(big_document(3000), connector_name="big")
            assert again is catalog and compiler.compiles == 1
            other = await compiler.compile(big_document(3000), connector_name="other")
            assert isinstance(other, ToolDefinitions) and compiler.compiles == 2
        finally:
            compiler.close()

    asyncio.run(run())


def test_a_compile_over_its_time_is_ended_and_the_next_one_gets_a_fresh_worker() -> None:
    async def run() -> None:
        compiler = CatalogCompiler(seconds=0.05, memory_bytes=256 << 20)
        try:
            failure = await compiler.compile(big_document(4000), connector_name="big")
            assert failure == CatalogFailure(
                reason="CatalogTooComplex", detail="compiling it takes more than 0.05s"
            )
            compiler.seconds = 60
            small = await compiler.compile(big_document(2), connector_name="small")
            assert isinstance(small, ToolDefinitions)
        finally:
            compiler.close()

    asyncio.run(run())


def test_a_compile_over_its_memory_is_refused_and_the_operator_is_untouched() -> None:
    async def run() -> None:
        compiler = CatalogCompiler(seconds=60, memory_bytes=4 << 20)
        try:
            failure = await compiler.compile(big_document(4000), connector_name="big")
            assert isinstance(failure, CatalogFailure) and failure.reason == "CatalogTooComplex"
            assert "MiB" in failure.detail
        finally:
            compiler.close()

    asyncio.run(run())


def test_the_cache_is_bounded_by_the_documents_size() -> None:
    async def run() -> None:
        one, two = big_document(20), big_document(21)
        compiler = CatalogCompiler(seconds=0, memory_bytes=0, cache_text_bytes=len(one) + len(two) - 1)
        await compiler.compile(one, connector_name="big")
        await compiler.compile(two, connector_name="big")  # over the bound: the older entry goes
        await compiler.compile(two, connector_name="big")
        assert compiler.compiles == 2
        await compiler.compile(one, connector_name="big")
        assert compiler.compiles == 3

    asyncio.run(run())
