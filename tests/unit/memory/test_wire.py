"""Request bodies: limits and the fields each error names; ids sort by time; store settings."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agent_runtime.memory.records import NamespaceSelector, new_record_id
from agent_runtime.memory.store import open_store
from agent_runtime.memory.wire import SearchBody, WriteBody
from agent_runtime.protocol import validation_problems


def problems(model: Any, body: dict[str, Any]) -> list[dict[str, str]]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    return validation_problems(caught.value)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": "x"}, "namespace"),
        ({"namespace": "a.", "content": "x"}, "namespace"),
        ({"namespace": "a\nb", "content": "x"}, "namespace"),
        ({"namespace": "n", "content": "x" * 32_769}, "content"),
        ({"namespace": "n", "content": "x", "org_id": "o" * 129}, "org_id"),
        ({"namespace": "n", "content": "x", "extra": 1}, "extra"),
        ({"namespace": "n", "content": "x", "metadata": {"big": "x" * 70_000}}, "metadata"),
    ],
)
def test_write_errors_name_the_field(body: dict[str, Any], field: str) -> None:
    assert problems(WriteBody, body)[0]["field"] == field


def test_search_needs_one_namespace_and_a_sane_top_k() -> None:
    assert "exactly one of namespace" in problems(SearchBody, {"query": "q"})[0]["problem"]
    assert problems(SearchBody, {"namespace": "n", "top_k": 101})[0]["field"] == "top_k"
    assert SearchBody.model_validate({"namespace": "n"}).top_k == 10


def test_ids_are_unique_and_sort_by_time() -> None:
    ids = [new_record_id(1_760_000_000 + i) for i in range(50)]
    assert ids == sorted(ids) and len(set(ids)) == 50 and all(len(i) == 26 for i in ids)


def test_prefix_selector_matches_whole_segments() -> None:
    selector = NamespaceSelector("a.b", prefix=True)
    assert [selector.matches(n) for n in ("a.b", "a.b.c", "a.bc", "a")] == [True, True, False, False]
    assert not NamespaceSelector("a.b").matches("a.b.c")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "MEMORY_STORE_TYPE=sqlite (the default) needs MEMORY_SQLITE_PATH"),
        ({"MEMORY_STORE_TYPE": "redis"}, "MEMORY_STORE_TYPE must be one of sqlite, mongodb"),
        ({"MEMORY_STORE_TYPE": "mongodb"}, "MEMORY_STORE_TYPE=mongodb needs MEMORY_MONGODB_URI"),
        (
            {"MEMORY_STORE_TYPE": "mongodb", "MEMORY_MONGODB_URI": "http://u:pw@h"},
            "MEMORY_MONGODB_URI must start with mongodb://",
        ),
        (
            {
                "MEMORY_STORE_TYPE": "mongodb",
                "MEMORY_MONGODB_URI": "mongodb://h",
                "MEMORY_MONGODB_DATABASE": "a b",
            },
            "MEMORY_MONGODB_DATABASE must be",
        ),
    ],
)
def test_store_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        open_store(env)
    assert message in str(caught.value)
    assert "pw" not in str(caught.value)


def test_store_defaults() -> None:
    mongo = open_store({"MEMORY_STORE_TYPE": "mongodb", "MEMORY_MONGODB_URI": "mongodb://u:secret@h:27017/"})
    assert "secret" not in repr(mongo) and mongo.database == "agent_memory"  # type: ignore[attr-defined]
