"""What OAuth costs an MCP call once a token is kept: the connector with `auth: {type: oauth}` (the token
file read and checked per call, B-23) against the same connector type sending the same access token as a
static `token` credential, same server (the official SDK behind its bearer middleware), same run, calls
interleaved in blocks. Prints each path's p50/p99, the p50 ratio and the microseconds added, and the
token lookup alone (`OAuthSession.token()` with a good token kept) against reading an env variable."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_runtime.connectors.builtin.registry import create_connector
from agent_runtime.connectors.mcp.catalog import DiscoveredTool, materialize_mcp
from agent_runtime.connectors.mcp.oauth_store import DIR_ENV
from tests.providers.mcp_oauth_peer import CLIENT_ID, CLIENT_SECRET, mcp_oauth_server

ROUNDS = 8
BLOCK = 100
WARMUP = 50
LOOKUPS = 5000
ID8 = "be0c4e12"


def _connector(url: str, *, oauth: dict[str, Any] | None) -> Any:
    credentials = (
        {"client_id": "B_CLIENT_ID", "client_secret": "B_CLIENT_SECRET"} if oauth else {"token": "B_TOKEN"}
    )
    config: dict[str, Any] = {"url": url, **({"auth": oauth} if oauth else {})}
    return create_connector(
        materialize_mcp(
            name="bench",
            id8=ID8,
            config=config,
            credentials=credentials,
            tools=[DiscoveredTool(name="echo", readOnly=True)],
        )
    )


async def _timed(connector: Any, env: dict[str, str], count: int) -> list[float]:
    out = []
    for _ in range(count):
        started = time.perf_counter()
        await connector.execute(f"mcp.{ID8}.echo", {"text": "hi"}, env=env)
        out.append(time.perf_counter() - started)
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _measure(url: str, issuer: str, directory: Path) -> dict[str, Any]:
    env = {"B_CLIENT_ID": CLIENT_ID, "B_CLIENT_SECRET": CLIENT_SECRET}
    oauth = _connector(url, oauth={"type": "oauth", "authorization_server": issuer})
    await _timed(oauth, env, WARMUP)  # the first call gets and keeps the token
    token = json.loads((directory / "bench.json").read_text())["tokens"]["access_token"]
    static = _connector(url, oauth=None)
    static_env = {**env, "B_TOKEN": token}
    await _timed(static, static_env, WARMUP)
    times: dict[str, list[float]] = {"static token": [], "oauth": []}
    for round_ in range(ROUNDS):  # blocks in turns, each path first in half the rounds
        order = [("static token", static, static_env), ("oauth", oauth, env)]
        for name, connector, with_env in order if round_ % 2 == 0 else order[::-1]:
            times[name] += await _timed(connector, with_env, BLOCK)

    async def sent(token: str | None) -> None:
        return None

    overhead = {}
    for name, connector, with_env in (("static token", static, static_env), ("oauth", oauth, env)):
        started = time.perf_counter()
        for _ in range(LOOKUPS):  # the credential step alone: what each call pays before it is sent
            await connector.authorization.call(connector, with_env, sent)
        overhead[name] = (time.perf_counter() - started) / LOOKUPS
    await oauth.aclose()
    await static.aclose()
    return {"times": times, "overhead": overhead}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, mcp_oauth_server() as peer:
        os.environ[DIR_ENV] = tmp
        try:
            found = asyncio.run(_measure(peer.url, peer.issuer, Path(tmp)))
        finally:
            del os.environ[DIR_ENV]
        issued = peer.stats()["issued"]
    times = found["times"]
    for name, values in times.items():
        p50, p99 = statistics.median(values) * 1e3, _pct(values, 0.99) * 1e3
        print(f"{name:>13}: p50 {p50:.3f} ms  p99 {p99:.3f} ms ({len(values)} calls)")
    base, mine = statistics.median(times["static token"]), statistics.median(times["oauth"])
    print(f"p50 ratio oauth/static {mine / base:.3f}, added {(mine - base) * 1e6:.0f} us per call")
    kept, env_read = found["overhead"]["oauth"] * 1e6, found["overhead"]["static token"] * 1e6
    print(
        f"credential step per call: oauth (token file read, checked) {kept:.1f} us, static {env_read:.2f} us"
    )
    print(f"tokens issued in the run: {issued}")


if __name__ == "__main__":
    main()
