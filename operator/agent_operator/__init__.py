"""Agent Engine operator: reconciles Agent and Connector resources."""

__version__ = "0.2.0"
