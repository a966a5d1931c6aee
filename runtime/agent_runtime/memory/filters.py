"""Metadata filters: a small MongoDB-like language, checked once and compiled to a predicate.

    {"topic": "food"}                                  equality (a list field matches on any element)
    {"score": {"$gte": 3, "$lt": 10}}                  $eq $ne $gt $gte $lt $lte $in $nin $exists
    {"$or": [{"lang": "en"}, {"lang": {"$in": ["es", "ca"]}}]}      $and $or
    {"author.name": "Ada"}                             dotted paths reach into nested objects

Both stores evaluate the same compiled predicate, so a filter means exactly one thing everywhere. Booleans
are never numbers (`true` does not equal `1`); ordering compares numbers with numbers and strings with
strings, anything else does not match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Predicate = Callable[[Mapping[str, Any]], bool]

MAX_CONDITIONS = 64
MAX_DEPTH = 8
_PATH = re.compile(r"[A-Za-z0-9_@-]{1,64}(?:\.[A-Za-z0-9_@-]{1,64}){0,7}")
_COMPARISONS = ("$gt", "$gte", "$lt", "$lte")
_OPERATORS = ("$eq", "$ne", *_COMPARISONS, "$in", "$nin", "$exists")
_MISSING = object()


class FilterError(ValueError):
    """A malformed filter; the message names the part (`filter.<path>`) and what is wrong with it."""


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


def _matches_value(found: Any, expected: Any) -> bool:
    """Equality as a document store means it: null matches a missing field, a list matches on any element."""
    if expected is None:
        return found is _MISSING or found is None
    if found is _MISSING:
        return False
    if isinstance(found, list) and not isinstance(expected, list):
        return any(_equal(item, expected) for item in found)
    return _equal(found, expected)


def _ordered(found: Any, bound: Any, op: str) -> bool:
    if not ((_is_number(found) and _is_number(bound)) or (isinstance(found, str) and isinstance(bound, str))):
        return False
    if op == "$gt":
        return bool(found > bound)
    if op == "$gte":
        return bool(found >= bound)
    if op == "$lt":
        return bool(found < bound)
    return bool(found <= bound)


def _lookup(doc: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = doc
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


class _Compiler:
    def __init__(self) -> None:
        self.conditions = 0

    def count(self, where: str) -> None:
        self.conditions += 1
        if self.conditions > MAX_CONDITIONS:
            raise FilterError(f"{where}: more than {MAX_CONDITIONS} conditions; split the query")

    def compile(self, spec: Any, where: str, depth: int) -> Predicate:
        if depth > MAX_DEPTH:
            raise FilterError(f"{where}: nested deeper than {MAX_DEPTH} levels")
        if not isinstance(spec, Mapping) or not spec:
            raise FilterError(f"{where}: must be a non-empty object of field conditions")
        parts = [self.part(key, value, where, depth) for key, value in spec.items()]
        return parts[0] if len(parts) == 1 else (lambda doc: all(part(doc) for part in parts))

    def part(self, key: Any, value: Any, where: str, depth: int) -> Predicate:
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise FilterError(f"{where}.{key}: must be a non-empty list of filters")
            subs = [self.compile(item, f"{where}.{key}[{i}]", depth + 1) for i, item in enumerate(value)]
            if key == "$and":
                return lambda doc: all(sub(doc) for sub in subs)
            return lambda doc: any(sub(doc) for sub in subs)
        if not isinstance(key, str) or not _PATH.fullmatch(key):
            raise FilterError(
                f"{where}: {str(key)[:80]!r} is not a field path or $and/$or; use letters, digits, '_@-' "
                "and dots for nested fields"
            )
        path = tuple(key.split("."))
        here = f"{where}.{key}"
        if isinstance(value, Mapping) and any(str(k).startswith("$") for k in value):
            return self.operators(path, value, here)
        self.count(here)
        self.check_operand(value, here)
        return lambda doc: _matches_value(_lookup(doc, path), value)

    def check_operand(self, value: Any, where: str) -> None:
        if _is_scalar(value):
            return
        if isinstance(value, list) and all(_is_scalar(item) for item in value):
            return
        raise FilterError(f"{where}: compare with a string, number, boolean, null or a list of them")

    def operators(self, path: tuple[str, ...], ops: Mapping[str, Any], where: str) -> Predicate:
        checks: list[Predicate] = []
        for op, operand in ops.items():
            here = f"{where}.{op}"
            self.count(here)
            if op not in _OPERATORS:
                raise FilterError(f"{here}: unknown operator; use one of {', '.join(_OPERATORS)}")
            checks.append(self.operator(path, op, operand, here))
        return checks[0] if len(checks) == 1 else (lambda doc: all(check(doc) for check in checks))

    def operator(self, path: tuple[str, ...], op: str, operand: Any, where: str) -> Predicate:
        if op in ("$eq", "$ne"):
            self.check_operand(operand, where)
            if op == "$eq":
                return lambda doc: _matches_value(_lookup(doc, path), operand)
            return lambda doc: not _matches_value(_lookup(doc, path), operand)
        if op in _COMPARISONS:
            if not (_is_number(operand) or isinstance(operand, str)):
                raise FilterError(f"{where}: needs a number or a string")
            return lambda doc: _ordered(_lookup(doc, path), operand, op)
        if op in ("$in", "$nin"):
            if not isinstance(operand, list) or not all(_is_scalar(item) for item in operand):
                raise FilterError(f"{where}: needs a list of strings, numbers, booleans or nulls")
            if len(operand) > 1000:
                raise FilterError(f"{where}: more than 1000 values")

            def member(doc: Mapping[str, Any]) -> bool:
                found = _lookup(doc, path)
                return any(_matches_value(found, item) for item in operand)

            return member if op == "$in" else (lambda doc: not member(doc))
        if not isinstance(operand, bool):
            raise FilterError(f"{where}: needs true or false")
        return lambda doc: (_lookup(doc, path) is not _MISSING) is operand


def compile_filter(spec: Mapping[str, Any] | None) -> Predicate | None:
    """The predicate over a record's metadata, or None for no filter; a FilterError names what is wrong."""
    if spec is None:
        return None
    return _Compiler().compile(spec, "filter", 0)
