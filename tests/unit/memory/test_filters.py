"""Metadata filters: what each operator means, and the errors that name the bad part."""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime.memory.filters import MAX_CONDITIONS, FilterError, compile_filter

DOC = {
    "topic": "food",
    "year": 2024,
    "score": 4.5,
    "ok": True,
    "tags": ["a", "b"],
    "who": {"name": "Ada"},
    "none": None,
}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"topic": "food"}, True),
        ({"topic": "travel"}, False),
        ({"year": 2024.0}, True),
        ({"ok": 1}, False),  # booleans are never numbers
        ({"year": True}, False),
        ({"tags": "a"}, True),  # a list field matches on any element
        ({"tags": ["a", "b"]}, True),
        ({"who.name": "Ada"}, True),
        ({"missing": None}, True),
        ({"none": None}, True),
        ({"topic": None}, False),
        ({"year": {"$gte": 2024, "$lt": 2025}}, True),
        ({"year": {"$gt": 2024}}, False),
        ({"topic": {"$gt": "a"}}, True),
        ({"topic": {"$gt": 1}}, False),  # strings and numbers do not order against each other
        ({"score": {"$lte": 4.5}}, True),
        ({"topic": {"$in": ["food", "drink"]}}, True),
        ({"topic": {"$nin": ["food"]}}, False),
        ({"missing": {"$ne": 1}}, True),
        ({"missing": {"$exists": False}}, True),
        ({"who": {"$exists": True}}, True),
        ({"$or": [{"topic": "x"}, {"year": 2024}]}, True),
        ({"$and": [{"topic": "food"}, {"year": {"$ne": 2024}}]}, False),
        ({"topic": "food", "year": 2023}, False),
    ],
)
def test_semantics(spec: dict[str, Any], expected: bool) -> None:
    predicate = compile_filter(spec)
    assert predicate is not None and predicate(DOC) is expected


def test_no_filter_is_none() -> None:
    assert compile_filter(None) is None


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({}, "filter: must be a non-empty object"),
        ([], "filter: must be a non-empty object"),
        ({"$where": "1"}, "filter: '$where' is not a field path"),
        ({"a b": 1}, "filter: 'a b' is not a field path"),
        ({"year": {"$regex": "x"}}, "filter.year.$regex: unknown operator"),
        ({"year": {"$gt": [1]}}, "filter.year.$gt: needs a number or a string"),
        ({"year": {"$in": "x"}}, "filter.year.$in: needs a list"),
        ({"year": {"$exists": 1}}, "filter.year.$exists: needs true or false"),
        ({"year": {"nested": 1}}, "filter.year: compare with a string"),
        ({"$or": []}, "filter.$or: must be a non-empty list"),
        ({"$and": [{}]}, "filter.$and[0]: must be a non-empty object"),
    ],
)
def test_malformed_filters_name_the_part(spec: Any, where: str) -> None:
    with pytest.raises(FilterError) as caught:
        compile_filter(spec)
    assert str(caught.value).startswith(where)


def test_size_and_depth_are_bounded() -> None:
    with pytest.raises(FilterError, match=f"more than {MAX_CONDITIONS} conditions"):
        compile_filter({f"f{i}": i for i in range(MAX_CONDITIONS + 1)})
    deep: dict[str, Any] = {"x": 1}
    for _ in range(10):
        deep = {"$and": [deep]}
    with pytest.raises(FilterError, match="nested deeper"):
        compile_filter(deep)
