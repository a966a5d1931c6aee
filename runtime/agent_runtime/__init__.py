"""Agent Engine runtime: one package, one image; RUNNER_MODE picks the component."""

__version__ = "0.2.0"
