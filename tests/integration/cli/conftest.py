"""The CLI tier reuses the agent loop's platform: the OE, AER and Tool Pod as real processes on loopback.

The CLI reaches the OE through a recording proxy: after each test every request it sent, and every JSON
answer it got, is checked against the document the OE serves at /openapi.json.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Process
from tests.integration.cli.recorder import Recorder, problems
from tests.integration.loop.conftest import llm_peer, provider_url
from tests.integration.loop.harness import Platform
from tests.providers.llm_peer import RunningLLMPeer

__all__ = ["checked_against_openapi", "llm_peer", "platform", "provider_url"]


@contextlib.contextmanager
def checked_against_openapi(platform: Platform) -> Iterator[Platform]:
    """`platform` with the CLI's traffic recorded (`platform.cli_url`), checked when the block ends."""
    recorder = Recorder(upstream=platform.oe_url).start()
    platform.cli_url = recorder.url  # type: ignore[attr-defined]
    try:
        yield platform
    finally:
        recorder.stop()
    document = httpx.get(f"{platform.oe_url}/openapi.json", timeout=10).json()
    found = problems(document, recorder.exchanges)
    assert not found, "the CLI's requests or the OE's answers do not fit /openapi.json:\n" + "\n".join(found)


@pytest.fixture
def platform(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> Iterator[Platform]:
    started = Platform(tmp=tmp_path, spawn=spawn, llm_base_url=llm_peer.base_url, provider_url=provider_url)
    with checked_against_openapi(started.start()) as checked:
        yield checked
