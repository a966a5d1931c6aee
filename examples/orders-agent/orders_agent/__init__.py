"""The orders example agent: built-in postgres, slack and webhook connectors, governed by the platform."""
