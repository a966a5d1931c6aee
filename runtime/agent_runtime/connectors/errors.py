"""Errors the connector core raises for bad input. Each message names the field and the fix."""

from __future__ import annotations


class ConnectorError(ValueError):
    """A document, catalog, tool.yaml, bundle or agent.yaml that cannot be used as given."""


class DocumentTooComplexError(ConnectorError):
    """A document over the size or alias-expansion bounds: refused before it can exhaust memory or time."""


class ExternalReferenceError(ConnectorError):
    """A `$ref` that leaves the document: the whole document is refused, nothing is fetched."""


class ToolArgumentError(ValueError):
    """A tool call whose arguments cannot form a request (raised before anything is sent)."""


class UnknownToolError(ValueError):
    """A tool name the executor's definitions do not contain."""


class CredentialMissingError(ValueError):
    """The connector needs a credential but its environment variable is unset or empty."""
