"""Pure helpers shared by the store backends: change validation, page cursors, URI redaction."""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import TypeAdapter, ValidationError

from agent_runtime.oe.store.base import ExecutionRecord

# Backends index these, so changing them would leave the record and its index disagreeing.
IMMUTABLE_EXECUTION_FIELDS = frozenset({"execution_id", "agent", "created_at"})


@functools.cache
def _field_adapter(name: str) -> TypeAdapter[Any]:
    field = ExecutionRecord.model_fields[name]
    return TypeAdapter(Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation)


def encode_execution_changes(changes: Mapping[str, Any], *, allow_status: bool) -> dict[str, str]:
    """Validate each change against its `ExecutionRecord` field; return field -> compact JSON text.

    Raises ValueError for an unknown or immutable field, `status` when not allowed, or a bad value.
    """
    encoded: dict[str, str] = {}
    for name, value in changes.items():
        if name not in ExecutionRecord.model_fields:
            raise ValueError(f"ExecutionRecord has no field {name!r}")
        if name in IMMUTABLE_EXECUTION_FIELDS:
            raise ValueError(f"ExecutionRecord.{name} cannot change")
        if name == "status" and not allow_status:
            raise ValueError("status changes only through transition()")
        adapter = _field_adapter(name)
        try:
            encoded[name] = adapter.dump_json(adapter.validate_python(value)).decode()
        except ValidationError as exc:
            raise ValueError(f"invalid value for ExecutionRecord.{name}: {exc.errors()[0]['msg']}") from None
    return encoded


def encode_cursor(created_at: float, execution_id: str) -> str:
    """An opaque cursor naming the last execution of a page (JSON keeps the float exact)."""
    raw = json.dumps([created_at, execution_id], separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """The (created_at, execution_id) inside a cursor from `encode_cursor`; ValueError for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, execution_id = json.loads(raw)
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
        raise ValueError("invalid page cursor") from None
    if (
        not isinstance(created_at, int | float)
        or isinstance(created_at, bool)
        or not isinstance(execution_id, str)
    ):
        raise ValueError("invalid page cursor")
    return float(created_at), execution_id


_SECRET_QUERY_WORDS = ("password", "secret", "token", "authmechanismproperties")


def redact_uri(uri: str) -> str:
    """`uri` with its password (and secret-looking query values) replaced by `***`, safe to log."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return "<unparsable URI>"
    netloc = parts.netloc
    userinfo, at, hostinfo = netloc.rpartition("@")
    if at:
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}{':***' if colon else ''}@{hostinfo}"
    pairs = [pair.partition("=") for pair in parts.query.split("&") if pair]
    secret = [bool(sep) and any(word in key.lower() for word in _SECRET_QUERY_WORDS) for key, sep, _ in pairs]
    query = "&".join(
        f"{key}=***" if hidden else f"{key}{sep}{value}"
        for (key, sep, value), hidden in zip(pairs, secret, strict=True)
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query))
