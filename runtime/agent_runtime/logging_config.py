"""Process-wide logging for runtime components: one line per record, JSON when STRUCTURED_LOGGING=true.

Installed by the launcher before any tenant code is imported, so even an import-time failure of
`AGENT_ENTRYPOINT` comes out as one well-formed record. `execution_id` and `step` come from context
variables set around each tool call, so every record logged during a call carries them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import traceback
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO

from agent_runtime.contract import STRUCTURED_LOGGING_ENV

execution_id_var: ContextVar[str | None] = ContextVar("execution_id", default=None)
step_var: ContextVar[int | None] = ContextVar("step", default=None)

_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
# Loggers whose own handlers would print a second, differently formatted copy of each record.
_THIRD_PARTY_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "httpx", "httpcore")


def structured_logging_enabled(env: Mapping[str, str]) -> bool:
    """True when the pod asked for JSON log lines."""
    return env.get(STRUCTURED_LOGGING_ENV, "").strip().lower() in _TRUE_WORDS


@contextlib.contextmanager
def log_context(*, execution_id: str | None, step: int | None) -> Iterator[None]:
    """Tag every record logged inside the block with the execution and step it belongs to."""
    execution_token = execution_id_var.set(execution_id)
    step_token = step_var.set(step)
    try:
        yield
    finally:
        step_var.reset(step_token)
        execution_id_var.reset(execution_token)


class JsonFormatter(logging.Formatter):
    """One JSON object per record; a traceback is a field, never extra lines."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        execution_id = execution_id_var.get()
        if execution_id is not None:
            entry["execution_id"] = execution_id
        step = step_var.get()
        if step is not None:
            entry["step"] = step
        if record.exc_info and record.exc_info[1] is not None:
            entry["error_type"] = type(record.exc_info[1]).__name__
            entry["traceback"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return json.dumps(entry, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """Human-readable lines for local runs, with the execution context appended when known."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        execution_id, step = execution_id_var.get(), step_var.get()
        if execution_id is None and step is None:
            return text
        head, newline, rest = text.partition("\n")
        return f"{head} [execution_id={execution_id} step={step}]{newline}{rest}"


class _RuntimeHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler this module installed, so installing again replaces rather than adds."""


def install_logging(
    env: Mapping[str, str], *, stream: TextIO | None = None, level: int = logging.INFO
) -> logging.Handler:
    """Route every logger through one handler on the root logger. Idempotent: a second call reuses it."""
    root = logging.getLogger()
    formatter: logging.Formatter = JsonFormatter() if structured_logging_enabled(env) else TextFormatter()
    handler = next((h for h in root.handlers if isinstance(h, _RuntimeHandler)), None)
    if handler is None:
        handler = _RuntimeHandler(stream if stream is not None else sys.stderr)
        root.addHandler(handler)
    elif stream is not None:
        handler.setStream(stream)
    handler.setFormatter(formatter)
    root.setLevel(level)
    for name in _THIRD_PARTY_LOGGERS:
        third_party = logging.getLogger(name)
        third_party.handlers.clear()
        third_party.propagate = True
    # httpx logs every request URL at INFO; query strings may carry credentials.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
    return handler
