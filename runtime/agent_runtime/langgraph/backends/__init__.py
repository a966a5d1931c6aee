"""deepagents backends whose operations run in the Tool Pod (LG-19)."""
