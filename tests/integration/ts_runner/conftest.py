"""Fixtures for the TS runner tier: an LLM peer, the echo provider and a platform whose AER and Tool Pod are
the TypeScript runner (the OE is the Python one)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Process
from tests.integration.loop.harness import LLM_KEY
from tests.integration.ts_runner.node_platform import NodePlatform, node_platform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import RunningLLMPeer, running_llm_peer


@pytest.fixture
def llm_peer() -> Iterator[RunningLLMPeer]:
    with running_llm_peer(api_key=LLM_KEY) as peer:
        yield peer


@pytest.fixture
def provider_url() -> Iterator[str]:
    with running_echo_provider() as provider:
        yield provider.url


@pytest.fixture
def platform(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> NodePlatform:
    return node_platform(tmp_path, spawn, llm_base_url=llm_peer.base_url, provider_url=provider_url).start()
