"""LangGraph fixtures: an LLM peer (FerretDB comes from tests/integration/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.loop.harness import LLM_KEY
from tests.providers.llm_peer import RunningLLMPeer, running_llm_peer


@pytest.fixture
def llm_peer() -> Iterator[RunningLLMPeer]:
    """The loopback chat-completions peer, with the key the loop harness gives the Tool Pod."""
    with running_llm_peer(api_key=LLM_KEY) as peer:
        yield peer
