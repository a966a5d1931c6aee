"""Whose memory a request may touch: the user and org of the OE's statement, never the caller's word.

Pure: the Memory server verifies the statement (agent_runtime.execution_token) and asks `scoped` what the
request's body becomes. A body may leave `user_id`/`org_id` out (they are filled from the statement) or
repeat them; naming anyone else is refused, with the same answer whether that user has records or not.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

STATEMENT_HEADER = "x-agent-engine-statement"
# Routes an export statement (a read outside an execution) opens; writes and deletes need an execution's.
READ_OPERATIONS = frozenset({"get", "search", "list", "namespaces", "subtree", "summarize"})

B = TypeVar("B", bound=BaseModel)


class ScopeRefused(Exception):
    """403: `reason` a short code, `detail` what to do; never says whether the named user exists."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def scoped(body: B, *, org_id: str, user_id: str) -> B:
    """`body` with the statement's org and user (pure); ScopeRefused when it names others."""
    for field, granted in (("org_id", org_id), ("user_id", user_id)):
        asked = getattr(body, field)
        if asked and asked != granted:
            raise ScopeRefused(
                "scope_not_granted",
                f"{field}: the OE's statement for this call grants another {field}; leave {field} out "
                "(it is taken from the statement) or send the execution's own",
            )
    return body.model_copy(update={"org_id": org_id, "user_id": user_id})


def check_operation(operation: str, *, purpose: str) -> None:
    """An export statement opens reads only; control and knowledge statements open no memory (pure)."""
    if purpose == "export" and operation not in READ_OPERATIONS:
        raise ScopeRefused("read_only_statement", f"an export statement opens reads only, not {operation}")
    if purpose == "control":
        raise ScopeRefused("wrong_purpose", "a control statement opens no memory; use the execution's")
    if purpose == "knowledge":
        # The OE's statement for an Agent's documents names no user: it must never open a user's memory.
        raise ScopeRefused(
            "wrong_purpose", "a knowledge statement opens no user's memory; use the execution's"
        )
