"""`agentengine dev`: one agent's components as supervised local processes, as the operator would run them."""
