"""An example LangGraph agent for Agent Engine."""
