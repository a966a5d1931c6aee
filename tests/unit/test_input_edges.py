"""The edge checks every request passes before a route (listen.py), and the memory records' bounds."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from agent_runtime.listen import (
    DEFAULT_BODY_TIMEOUT_S,
    MAX_JSON_DEPTH,
    body_timeout_from_env,
    json_edge_problem,
)
from agent_runtime.memory.records import decode_record, kept_created_at
from agent_runtime.memory.wire import MAX_EPOCH_S, ListBody, WriteBody
from agent_runtime.protocol import MAX_STEP, ToolExecuteRequest


def _deep(levels: int, *, key: str = "args") -> bytes:
    return f'{{"{key}": {"[" * levels}{"]" * levels}}}'.encode()


def test_nesting_up_to_the_bound_passes_and_one_more_names_the_top_level_field() -> None:
    assert json_edge_problem(_deep(MAX_JSON_DEPTH - 1)) is None  # the object itself is one level
    problem = json_edge_problem(_deep(MAX_JSON_DEPTH))
    assert problem is not None and problem["field"] == "args"
    assert "64 levels" in problem["problem"]


def test_brackets_inside_strings_are_text_not_nesting() -> None:
    text = json.dumps({"note": "[" * 500 + '\\"{' * 100, "n": 1}).encode()
    assert json_edge_problem(text) is None


def test_a_key_with_escapes_is_named_as_decoded() -> None:
    raw = b'{"a": 1, "we\\"ird": {"x": ' + b"[" * 100 + b"]" * 100 + b"}}"
    assert json_edge_problem(raw) == {
        "field": 'we"ird',
        "problem": "nested deeper than 64 levels of arrays and objects; flatten it",
    }


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"a": "ends in a backslash \\\\", "b": ' + b"[" * 70 + b"]" * 70 + b"}", "b"),
        (b'{"a": "\\"' + b"[" * 70 + b'", "b": 1}', None),
        (b'{"a": "\\\\\\"' + b"{" * 70 + b'", "b": "\\n[[["}', None),
    ],
    ids=["escaped-backslash-then-quote", "escaped-quote-then-brackets", "both"],
)
def test_escapes_never_hide_or_fake_a_quote(raw: bytes, field: str | None) -> None:
    json.loads(raw)  # each is valid JSON
    problem = json_edge_problem(raw)
    assert (problem and problem["field"]) == field, problem


def test_a_deep_array_at_the_top_is_the_body() -> None:
    problem = json_edge_problem(b"[" * 100 + b"]" * 100)
    assert problem is not None and problem["field"] == "(body)"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"step": 9223372036854775808}', "step"),
        (b'{"a": [1, -9223372036854775809]}', "a"),
        (b'{"x": NaN}', "x"),
        (b'{"x": -Infinity}', "x"),
        (b'{"x": 1e400}', "x"),
        (b'{"x": 1E+309}', "x"),
    ],
)
def test_numbers_no_store_holds_name_their_field(raw: bytes, field: str) -> None:
    problem = json_edge_problem(raw)
    assert problem is not None and problem["field"] == field, problem


@pytest.mark.parametrize(
    "raw",
    [
        b'{"step": 9223372036854775807}',
        b'{"x": -9223372036854775808}',
        b'{"x": 1e308}',
        b'{"x": 1e-400}',
        b'{"x": 0.12345678901234567890123}',
        b'{"x": 1.5e-05}',
        b'{"s": "NaN Infinity 1e999 99999999999999999999"}',
    ],
)
def test_numbers_in_range_and_text_that_looks_like_numbers_pass(raw: bytes) -> None:
    assert json_edge_problem(raw) is None


def test_body_timeout_setting() -> None:
    assert body_timeout_from_env({}) == DEFAULT_BODY_TIMEOUT_S
    assert body_timeout_from_env({"BODY_TIMEOUT_S": "2.5"}) == 2.5
    for bad in ("0", "-1", "ten", "1e9", "nan"):
        with pytest.raises(ValueError, match="BODY_TIMEOUT_S"):
            body_timeout_from_env({"BODY_TIMEOUT_S": bad})


def test_steps_are_bounded_to_what_an_execution_can_take() -> None:
    ToolExecuteRequest(execution_id="e", step=MAX_STEP, tool="t")
    with pytest.raises(ValidationError) as caught:
        ToolExecuteRequest(execution_id="e", step=MAX_STEP + 1, tool="t")
    assert caught.value.errors()[0]["loc"] == ("step",)


def test_memory_bounds_timestamps_offsets_and_vectors() -> None:
    WriteBody(namespace="n", content="c", occurred_at=MAX_EPOCH_S)
    for bad in ({"occurred_at": 1e308}, {"occurred_at": float("inf")}, {"embedding": [1e300]}):
        with pytest.raises(ValidationError):
            WriteBody(namespace="n", content="c", **bad)
    with pytest.raises(ValidationError):
        ListBody(namespace="n", offset=2**63)


def test_an_unloadable_stored_record_is_none_and_a_replacement_keeps_no_bad_created_at(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = {
        "id": "r1",
        "kind": "episodic",
        "workspace_id": "w",
        "namespace": "n",
        "content": "secret content",
        "metadata": {},
        "created_at": 1.0,
        "updated_at": 1.0,
    }
    assert decode_record(json.dumps(good), key="episodic/w/n/r1") is not None
    bad = {**good, "occurred_at": 1e308}
    assert decode_record(json.dumps(bad), key="episodic/w/n/r1") is None
    assert "episodic/w/n/r1 skipped" in caplog.text and "occurred_at" in caplog.text
    assert "secret content" not in caplog.text
    fresh = decode_record(json.dumps({**good, "created_at": 5.0}), key="k")
    assert fresh is not None
    assert kept_created_at({"created_at": 1e308}, fresh) == 5.0
    assert kept_created_at({"created_at": 2.0}, fresh) == 2.0
