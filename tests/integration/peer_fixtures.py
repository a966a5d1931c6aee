"""The loopback peers most tiers start per test: the LLM peer (chat-completions wire format, the loop tier's
key) and the echo provider. Conftests import these fixtures by name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.loop.harness import LLM_KEY
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
