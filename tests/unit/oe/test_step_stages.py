"""A `/tool/execute` passes each stage once, in order (issue 42): owner -> replay -> policy -> route ->
settle -> audit (one transaction with settle, issue 35) -> served -> record, read off the step pipeline's
code, and the engine only hands the call over."""

from __future__ import annotations

import ast
import inspect
import textwrap

from agent_runtime.oe.engine import Orchestrator
from agent_runtime.oe.steps import Steps

STAGES = ["_running", "_replay", "_policy", "run", "_settle", "_audit", "_served", "_record"]


def awaited_in_order(function: object) -> list[str]:
    """The names of the calls awaited in `function`'s body, in source order."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))  # type: ignore[arg-type]
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Await) and isinstance(node.value, ast.Call):
            func = node.value.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "?")
            found.append((node.lineno, node.col_offset, name))
    return [name for _, _, name in sorted(found)]


def test_each_stage_once_in_order() -> None:
    assert awaited_in_order(Steps._stages) == STAGES


def test_the_engine_enters_the_step_path_once() -> None:
    assert awaited_in_order(Orchestrator.tool_execute) == ["execute"]
    # Inside the step path, the stages are entered from `_stages` only.
    source = inspect.getsource(Steps)
    for stage in ("_running", "_replay", "_policy", "_settle", "_audit", "_served", "_record"):
        assert source.count(f"self.{stage}(") == 1, stage
    assert source.count("self.routes.run(") == 1
