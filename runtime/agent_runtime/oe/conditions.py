"""Conditions on a call, in CEL (issue 34): compiled and type checked once, evaluated under a cost limit.

A policy rule's `when` is a CEL expression (the language of Kubernetes' ValidatingAdmissionPolicy and CRD
rules) over the call's facts:

    tool   string              the tool's canonical name (`invoke_llm` for a model call)
    args   map(string, dyn)    the call's arguments (for a model call: {"llm_id": ...})
    agent  string              `<namespace>/<name>`
    user   string              the execution's user ("" when none)
    step   int                 the call's step number
    usage  map(string, dyn)    the execution's running usage: steps, model_calls, tool_calls, tokens, cost

The runtime is Google's CEL-C++ (`cel-expr-python`), with its checker: an undeclared name, a wrong operand
type or a non-bool result is a compile error, reported with the column it points at. Evaluation is bounded
twice. Before it runs, an estimate of its cost from the expression's shape (its size, how deeply its
comprehension macros nest, how many `+` may grow strings and lists) and from the sizes of this call's
inputs (the longest list or map, the bytes of string) must stay under `COST_LIMIT`, the figure Kubernetes
uses per expression; CEL has no unbounded loop, so a nest of comprehensions over large inputs is the way an
expression runs long, and concatenation the way it builds huge values. While it runs, CEL-C++'s own
iteration budget stops a comprehension that gets past the estimate. Anything that goes wrong is a
`ConditionFailed` whose reason says why; the policy denies on it (fail closed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cel_expr_python import cel

MAX_SOURCE_CHARS = 2048
# Kubernetes' per-expression runtime cost limit (k8s.io/apiserver's PerCallLimit), in the same spirit: one
# unit per operation, more for operations over large values.
COST_LIMIT = 1_000_000
# How many bytes of string an operation touches for one unit of cost.
_BYTES_PER_UNIT = 1024

VARIABLES: dict[str, Any] = {
    "tool": cel.Type.STRING,
    "args": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
    "agent": cel.Type.STRING,
    "user": cel.Type.STRING,
    "step": cel.Type.INT,
    "usage": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
}
USAGE_FIELDS = ("steps", "model_calls", "tool_calls", "tokens", "cost")
_ENV = cel.NewEnv(variables=VARIABLES)
_MACROS = frozenset({"map", "filter", "all", "exists", "exists_one"})
_TOKEN = re.compile(
    r"""(?x)
    (?P<string>[rR]?[bB]?(?:'''.*?'''|\"\"\"(?:.|\n)*?\"\"\"|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"))
    | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[uU]?)
    | (?P<op>&&|\|\||==|!=|<=|>=|[-+*/%!<>?:.,()\[\]{}])
    | (?P<space>\s+)
    """,
    re.DOTALL,
)


class ConditionError(ValueError):
    """An expression that cannot be used: it does not parse, does not type check, or is too long."""


class ConditionFailed(Exception):
    """An evaluation that gave no boolean answer (an error, a non-bool, or the cost limit): deny."""


@dataclass(frozen=True)
class Shape:
    """What the cost estimate needs of an expression: its size, comprehension nesting, and `+` count."""

    tokens: int
    depth: int
    plus: int
    longest_literal: int


@dataclass(frozen=True)
class Condition:
    """A compiled, checked expression."""

    source: str
    program: Any
    shape: Shape

    def evaluate(self, facts: Mapping[str, Any]) -> bool:
        """True or False for these facts; `ConditionFailed` with the reason otherwise."""
        longest, string_bytes = input_sizes(facts)
        cost = estimate_cost(self.shape, longest=longest, string_bytes=string_bytes)
        if cost > COST_LIMIT:
            raise ConditionFailed(
                f"the estimated cost {cost:.3g} is over the limit {COST_LIMIT:,} (comprehensions nested "
                f"{self.shape.depth} deep over inputs of up to {longest} items and {string_bytes} bytes of "
                "string); simplify the expression"
            )
        try:
            value = self.program.eval(data=facts)
        except Exception as exc:  # CEL-C++ raises for an exhausted budget and for inputs it cannot take
            raise ConditionFailed(_clean(str(exc))) from None
        result = value.value()
        if type(result) is bool:
            return result
        kind = value.type().name()
        if kind == "ERROR":
            raise ConditionFailed(_clean(str(result)))
        raise ConditionFailed(f"the expression gave a {kind.lower()}, not a bool")


def _clean(message: str) -> str:
    """CEL-C++'s status text without its status-code wrapping, on one line at most 300 characters."""
    text = re.sub(r"^[A-Z_]+: ", "", message.strip())
    text = re.sub(r"\s*\[[A-Z_]+\]$", "", text)
    text = text.removeprefix("ERROR: <input>:")
    first = text.splitlines()[0] if text else "evaluation failed"
    return first[:300]


def shape_of(source: str) -> Shape:
    """The expression's size, its deepest nest of comprehension macros, and how many `+` it has."""
    tokens: list[tuple[str, str]] = [
        (match.lastgroup or "", match.group())
        for match in _TOKEN.finditer(source)
        if match.lastgroup != "space"
    ]
    depth = deepest = plus = 0
    longest = items = 0
    # Per open bracket: whether it opened a macro, and (for '[') how many items the literal has so far.
    stack: list[tuple[str, bool]] = []
    for index, (kind, text) in enumerate(tokens):
        if text == "+":
            plus += 1
        if text in "([{" and kind == "op":
            macro = (
                text == "("
                and index >= 2
                and tokens[index - 1][0] == "ident"
                and tokens[index - 1][1] in _MACROS
                and tokens[index - 2][1] == "."
            )
            stack.append((text, macro))
            if macro:
                depth += 1
                deepest = max(deepest, depth)
            if text == "[":
                items = 1
        elif text in ")]}" and kind == "op" and stack:
            _, macro = stack.pop()
            if macro:
                depth -= 1
        elif text == "," and stack and stack[-1][0] == "[":
            items += 1
            longest = max(longest, items)
    return Shape(tokens=len(tokens), depth=deepest, plus=plus, longest_literal=max(longest, items))


def estimate_cost(shape: Shape, *, longest: int, string_bytes: int) -> float:
    """Operations the expression may do at most: each of its tokens once per iteration of every enclosing
    comprehension, each over strings that `+` may have grown to (plus + 1) times the input's bytes."""
    iterations = float(max(longest, shape.longest_literal) + 1) ** shape.depth
    per_operation = 1 + math.ceil((shape.plus + 1) * string_bytes / _BYTES_PER_UNIT) if shape.plus else 1
    return shape.tokens * iterations * per_operation


def input_sizes(facts: Mapping[str, Any]) -> tuple[int, int]:
    """The longest list or map and the total bytes of string in the facts (what a comprehension may
    iterate, and what concatenation may copy)."""
    longest = 0
    string_bytes = 0
    pending: list[Any] = list(facts.values())
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            string_bytes += len(item)
        elif isinstance(item, dict):
            longest = max(longest, len(item))
            pending.extend(item.values())
            string_bytes += sum(len(key) for key in item if isinstance(key, str))
        elif isinstance(item, list | tuple):
            longest = max(longest, len(item))
            pending.extend(item)
    return longest, string_bytes


@lru_cache(maxsize=4096)
def compile_condition(source: str) -> Condition:
    """Parse and type check `source`; `ConditionError` with CEL's message (line:column) otherwise."""
    if not source.strip():
        raise ConditionError("is empty: write a CEL expression such as 'args.amount > 10000', or drop when")
    if len(source) > MAX_SOURCE_CHARS:
        raise ConditionError(f"is {len(source)} characters; at most {MAX_SOURCE_CHARS}")
    try:
        program = _ENV.compile(source)
    except Exception as exc:  # CEL-C++ reports parse and check errors as one exception type
        raise ConditionError(f"does not compile: {_clean(str(exc))}") from None
    kind = program.return_type().name()
    if kind not in ("BOOL", "DYN"):
        raise ConditionError(f"must be a bool expression; this one gives a {kind.lower()}")
    return Condition(source=source, program=program, shape=shape_of(source))


def facts(
    *, tool: str, args: Mapping[str, Any], agent: str, user: str | None, step: int, usage: Mapping[str, Any]
) -> dict[str, Any]:
    """The variables an expression sees, in the types it was checked against."""
    return {
        "tool": tool,
        "args": dict(args),
        "agent": agent,
        "user": user or "",
        "step": step,
        "usage": {name: usage.get(name, 0) for name in USAGE_FIELDS},
    }


__all__ = [
    "COST_LIMIT",
    "Condition",
    "ConditionError",
    "ConditionFailed",
    "compile_condition",
    "estimate_cost",
    "facts",
    "input_sizes",
    "shape_of",
]
