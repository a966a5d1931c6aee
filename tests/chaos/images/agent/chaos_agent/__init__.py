"""The chaos tier's tenant Agent (tests/chaos/images/agent): a tool that needs memory, exact call lists."""
