"""The CLI tier reuses the agent loop's platform: the OE, AER and Tool Pod as real processes on loopback."""

from tests.integration.loop.conftest import llm_peer, platform, provider_url

__all__ = ["llm_peer", "platform", "provider_url"]
