"""Fixtures for the TS runner tier: an LLM peer, the echo provider and a platform whose AER and Tool Pod are
the TypeScript runner (the OE is the Python one)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Process
from tests.integration import peer_fixtures
from tests.integration.ts_runner.node_platform import NodePlatform, node_platform
from tests.providers.llm_peer import RunningLLMPeer

# The shared peers, by name, for this directory's tests.
llm_peer = peer_fixtures.llm_peer
provider_url = peer_fixtures.provider_url


@pytest.fixture
def platform(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> NodePlatform:
    return node_platform(tmp_path, spawn, llm_base_url=llm_peer.base_url, provider_url=provider_url).start()
