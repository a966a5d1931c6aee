"""ConnectorExecutor overhead: `execute()` vs a bare httpx request to the same loopback endpoint.

The provider runs in its own process. Calls alternate in blocks between the bare client and the
executor so that drift on a shared machine hits both alike. Prints p50/p90 per call for each and the
difference (the executor's overhead: request plan application, budget bookkeeping, capped streaming
read, JSON decode), then per-call request building alone, then the async path against both a bare
httpx.AsyncClient and a bare aiohttp session (aexecute runs httpx over an aiohttp transport), and async
throughput with concurrent callers.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable

import aiohttp
import httpx

from agent_runtime.connectors import ConnectorExecutor, ToolYaml, compile_catalog, materialize_connector
from tests.conftest import free_port, wait_for_port
from tests.providers.echo_provider import item_api_document

CALLS = 3000
BLOCK = 100
WARMUP = 300
CONCURRENT = 32
RATE_SECONDS = 3.0
CREDENTIAL = "bench-provider-credential"


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _interleaved(a: Callable[[], object], b: Callable[[], object]) -> tuple[list[float], list[float]]:
    timer = time.perf_counter
    samples_a: list[float] = []
    samples_b: list[float] = []
    for _ in range(WARMUP):
        a()
        b()
    for _ in range(CALLS // BLOCK):
        for call, samples in ((a, samples_a), (b, samples_b)):
            for _ in range(BLOCK):
                started = timer()
                call()
                samples.append(timer() - started)
    return samples_a, samples_b


async def _interleaved_async(a, b) -> tuple[list[float], list[float]]:  # type: ignore[no-untyped-def]
    timer = time.perf_counter
    samples_a: list[float] = []
    samples_b: list[float] = []
    for _ in range(WARMUP):
        await a()
        await b()
    for _ in range(CALLS // BLOCK):
        for call, samples in ((a, samples_a), (b, samples_b)):
            for _ in range(BLOCK):
                started = timer()
                await call()
                samples.append(timer() - started)
    return samples_a, samples_b


async def _rate(call) -> float:  # type: ignore[no-untyped-def]
    done = 0
    stop_at = time.perf_counter() + RATE_SECONDS

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            await call()
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENT)))
    return done / (time.perf_counter() - started)


def _report(label: str, bare: list[float], ours: list[float], *, baseline: str = "bare httpx") -> float:
    bare50, ours50 = _percentile(bare, 0.5) * 1e3, _percentile(ours, 0.5) * 1e3
    bare90, ours90 = _percentile(bare, 0.9) * 1e3, _percentile(ours, 0.9) * 1e3
    print(f"{label}: {baseline} p50 {bare50:.3f} ms p90 {bare90:.3f} ms", end=" | ")
    print(f"executor p50 {ours50:.3f} ms p90 {ours90:.3f} ms")
    overhead = ours50 - bare50
    ratio = ours50 / bare50
    print(f"{label}: executor overhead p50 {overhead:+.3f} ms ({ratio:.2f}x), p90 {ours90 - bare90:+.3f} ms")
    return overhead


def main() -> None:
    import subprocess

    port = free_port()
    provider = subprocess.Popen(
        [sys.executable, "-m", "tests.providers.echo_provider", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port("127.0.0.1", port, proc=provider)
        base = f"http://127.0.0.1:{port}"
        catalog = compile_catalog(item_api_document(), connector_name="echo")
        tool = ToolYaml(
            name="echo",
            source={"base_url": base},
            expose={"allow": ["*"]},
            auth={"type": "bearer", "env": "TOKEN"},
        )
        connector = materialize_connector(tool, catalog)
        env = {"TOKEN": CREDENTIAL}
        arguments = {"itemId": "7", "expand": "owner"}
        url = f"{base}/echo/items/7?expand=owner"
        headers = {"authorization": f"Bearer {CREDENTIAL}", "accept": "application/json"}
        print(f"{CALLS} sequential calls each, in blocks of {BLOCK}, after {WARMUP} warm-up calls each")

        with httpx.Client() as client, ConnectorExecutor(connector) as executor:
            bare, ours = _interleaved(
                lambda: client.get(url, headers=headers),
                lambda: executor.execute("echo_getItem", arguments, env=env),
            )
            sync_overhead = _report("sync ", bare, ours)

            started = time.perf_counter()
            for _ in range(20_000):
                executor.prepare("echo_getItem", arguments, env)
            building_us = (time.perf_counter() - started) / 20_000 * 1e6
        print(f"request building alone (prepare): {building_us:.1f} us per call")

        async def run_async() -> tuple[float, float, float, float, float]:
            """Sequential latency against both bare clients, then throughput of all three."""
            async with (
                httpx.AsyncClient(limits=httpx.Limits(max_connections=200)) as aclient,
                aiohttp.ClientSession() as session,
                ConnectorExecutor(connector) as aexecutor,
            ):

                async def bare_httpx() -> None:
                    await aclient.get(url, headers=headers)

                async def bare_aiohttp() -> None:
                    async with session.get(url, headers=headers) as response:
                        await response.read()

                async def our_call() -> None:
                    await aexecutor.aexecute("echo_getItem", arguments, env=env)

                abare, aours = await _interleaved_async(bare_httpx, our_call)
                vs_httpx = _report("async vs bare httpx.AsyncClient", abare, aours)
                abare, aours = await _interleaved_async(bare_aiohttp, our_call)
                vs_aiohttp = _report(
                    "async vs bare aiohttp (the pool under aexecute)", abare, aours, baseline="bare aiohttp"
                )
                rates = (await _rate(bare_httpx), await _rate(bare_aiohttp), await _rate(our_call))
                return vs_httpx, vs_aiohttp, *rates

        async_overhead, transport_overhead, httpx_rate, aiohttp_rate, our_rate = asyncio.run(run_async())
        print(
            f"async throughput, {CONCURRENT} concurrent callers for {RATE_SECONDS:g} s each: "
            f"bare httpx.AsyncClient {httpx_rate:.0f} calls/s, bare aiohttp {aiohttp_rate:.0f} calls/s, "
            f"executor.aexecute {our_rate:.0f} calls/s ({our_rate / httpx_rate:.1f}x httpx, "
            f"{our_rate / aiohttp_rate:.2f}x aiohttp; one loopback provider process shares the 2 cores)"
        )
        target = 0.3
        verdict = "met" if sync_overhead < target else "MISSED"
        print(
            f"target: p50 overhead < {target} ms -> {verdict} (sync {sync_overhead:.3f} ms; async "
            f"{async_overhead:.3f} ms vs httpx, {transport_overhead:.3f} ms vs aiohttp; "
            f"median of bare sync {statistics.median(bare) * 1e3:.3f} ms)"
        )
    finally:
        provider.terminate()
        provider.wait(timeout=10)


if __name__ == "__main__":
    main()
