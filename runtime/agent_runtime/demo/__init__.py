"""`make run` (python -m agent_runtime.demo): the whole platform on this machine, its main job shown through
the CLI's client of the OE. The control plane it needs is a separate program, never imported."""
