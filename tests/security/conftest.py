"""Fixtures for the security tier: the agent-loop tier's platform (OE, AER, Tool Pod as real processes) and
its peers, the very same fixtures."""

from tests.integration.loop.conftest import llm_peer, platform, provider_url

__all__ = ["llm_peer", "platform", "provider_url"]
