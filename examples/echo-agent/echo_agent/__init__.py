"""An example tenant agent for Agent Engine."""
