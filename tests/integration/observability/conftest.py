"""Observability fixtures: the LLM peer, with the key the loop harness gives the Tool Pod."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.loop.harness import LLM_KEY
from tests.providers.llm_peer import RunningLLMPeer, running_llm_peer


@pytest.fixture
def llm_peer() -> Iterator[RunningLLMPeer]:
    with running_llm_peer(api_key=LLM_KEY) as peer:
        yield peer
