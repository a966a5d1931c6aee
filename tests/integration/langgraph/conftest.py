"""LangGraph fixtures: one FerretDB for the session (the MongoDB wire protocol, over SQLite), an LLM peer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.ferretdb import FerretDBUnavailable, running_ferretdb
from tests.integration.loop.harness import LLM_KEY
from tests.providers.llm_peer import RunningLLMPeer, running_llm_peer


@pytest.fixture(scope="session")
def ferretdb_uri() -> Iterator[str]:
    """A FerretDB on 127.0.0.1 for the whole session; fails, never skips, without go."""
    try:
        with running_ferretdb() as uri:
            yield uri
    except FerretDBUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def llm_peer() -> Iterator[RunningLLMPeer]:
    """The loopback chat-completions peer, with the key the loop harness gives the Tool Pod."""
    with running_llm_peer(api_key=LLM_KEY) as peer:
        yield peer
