"""The chaos tier's tenant Agent (tests/chaos/tenant): a tool that needs memory, run by exact call lists."""
