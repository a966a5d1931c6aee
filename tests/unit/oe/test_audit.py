"""What the audit keeps: no known secret value, no credential-named field, no huge payload."""

from __future__ import annotations

from agent_runtime.oe.audit import MAX_AUDIT_VALUE_BYTES, audit_value
from agent_runtime.redaction import REDACTED

TOKEN = "runtime-token-planted-4d1f"


def test_known_secret_values_are_replaced_at_any_depth() -> None:
    value = {"note": f"use {TOKEN} here", "items": [TOKEN, {"deep": [TOKEN]}], "n": 3}
    cleaned = audit_value(value, secrets=(TOKEN,))
    assert TOKEN not in repr(cleaned)
    assert cleaned["n"] == 3
    assert cleaned["items"][0] == REDACTED


def test_credential_named_fields_are_masked() -> None:
    value = {"password": "hunter2", "nested": {"Api_Key": "k", "apiKey": "k2", "card": {"number": "4242"}}}
    cleaned = audit_value(value, secrets=())
    assert cleaned["password"] == REDACTED
    assert cleaned["nested"]["Api_Key"] == REDACTED
    assert cleaned["nested"]["apiKey"] == REDACTED
    assert cleaned["nested"]["card"] == {"number": "4242"}


def test_large_values_become_a_size_note() -> None:
    cleaned = audit_value({"blob": "x" * (MAX_AUDIT_VALUE_BYTES + 10)}, secrets=())
    assert cleaned["truncated"] is True
    assert cleaned["bytes"] > MAX_AUDIT_VALUE_BYTES
