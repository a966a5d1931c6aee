"""Fixtures for the agent-loop tier: an LLM peer, the echo provider and the whole platform."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Process
from tests.integration import peer_fixtures
from tests.integration.loop.harness import Platform
from tests.providers.llm_peer import RunningLLMPeer

# The shared peers, by name, for this directory's tests.
llm_peer = peer_fixtures.llm_peer
provider_url = peer_fixtures.provider_url


@pytest.fixture
def platform(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> Platform:
    return Platform(
        tmp=tmp_path, spawn=spawn, llm_base_url=llm_peer.base_url, provider_url=provider_url
    ).start()
