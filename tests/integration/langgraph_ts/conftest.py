"""Fixtures for the LangGraph.js tier: the LLM peer (the model the example's ChatOpenAI calls from the TS
Tool Pod) and the ledger provider (the refund side effect, counted per idempotency key)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.loop.harness import LLM_KEY
from tests.providers.ledger_provider import RunningLedger, running_ledger_provider
from tests.providers.llm_peer import RunningLLMPeer, running_llm_peer


@pytest.fixture
def llm_peer() -> Iterator[RunningLLMPeer]:
    with running_llm_peer(api_key=LLM_KEY) as peer:
        yield peer


@pytest.fixture
def ledger() -> Iterator[RunningLedger]:
    with running_ledger_provider() as provider:
        yield provider
