import io
import json
import logging
from collections.abc import Iterator

import pytest

from agent_runtime.logging_config import install_logging, log_context, structured_logging_enabled


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.parametrize(
    ("value", "expected"), [("true", True), ("TRUE", True), ("1", True), ("false", False), ("", False)]
)
def test_structured_logging_flag(value: str, expected: bool) -> None:
    assert structured_logging_enabled({"STRUCTURED_LOGGING": value}) is expected


def test_json_lines_carry_execution_context() -> None:
    stream = io.StringIO()
    install_logging({"STRUCTURED_LOGGING": "true"}, stream=stream)
    log = logging.getLogger("test.ctx")
    log.info("outside")
    with log_context(execution_id="exec-1", step=3):
        log.warning("inside %s", "call")
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "outside" and "execution_id" not in first
    assert second == {
        **second,
        "level": "WARNING",
        "message": "inside call",
        "execution_id": "exec-1",
        "step": 3,
    }


def test_exception_is_one_json_line() -> None:
    stream = io.StringIO()
    install_logging({"STRUCTURED_LOGGING": "true"}, stream=stream)
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        logging.getLogger("test.exc").error("failed", exc_info=exc)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["error_type"] == "RuntimeError" and "boom" in record["traceback"]


def test_install_is_idempotent() -> None:
    stream = io.StringIO()
    first = install_logging({}, stream=stream)
    second = install_logging({"STRUCTURED_LOGGING": "true"}, stream=stream)
    assert first is second
    assert sum(h is first for h in logging.getLogger().handlers) == 1
    logging.getLogger("test.once").info("once")
    assert len(stream.getvalue().splitlines()) == 1
    assert json.loads(stream.getvalue())["message"] == "once"


def test_text_lines_show_context() -> None:
    stream = io.StringIO()
    install_logging({}, stream=stream)
    with log_context(execution_id="e-9", step=0):
        logging.getLogger("test.text").info("hello")
    assert stream.getvalue().rstrip().endswith("hello [execution_id=e-9 step=0]")
