"""The Orchestration Engine: executions, policy, audit log, replay cache and routing, free of HTTP."""
