"""What the OE's parts raise; `servers/oe.py` turns each into its status code and body."""

from __future__ import annotations


class NotFound(Exception):
    """No such execution (or not the caller's): 404, with nothing that hints whether it exists."""


class Conflict(Exception):
    """The request contradicts the execution's state: 409 with a code and a sentence."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class UnknownAgent(Exception):
    """No registration for the Agent named."""


class BadReview(Exception):
    """A resume body that is well formed but does not fit the suspension: 400 naming the field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


__all__ = ["BadReview", "Conflict", "NotFound", "UnknownAgent"]
