"""What the entrypoint returns and how it is run (B-02): the builder's runnable, called with the input.

`@app.entrypoint def build(ctx)` returns the runnable: an async callable `run(input)` or an object with
`async ainvoke(input)` (a compiled graph). An `async def` entrypoint is the run function itself, for agents
that build nothing; the Tool Pod's start-up construction then has nothing to call and finds no models.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

Runnable = Callable[[Any], Awaitable[Any]]


def is_run_function(entrypoint: Callable[..., Any]) -> bool:
    """True for an `async def` entrypoint, which is run per execution rather than called to build."""
    return inspect.iscoroutinefunction(entrypoint)


def as_runnable(built: object) -> Runnable:
    """The run callable of what a builder returned; TypeError naming the fix for anything else."""
    if inspect.isawaitable(built):
        if inspect.iscoroutine(built):
            built.close()  # never awaited: closing it avoids a "never awaited" warning
        raise TypeError(
            "the entrypoint returned an awaitable: a builder is a plain `def build(ctx)` that returns the "
            "runnable, while an `async def` entrypoint is itself the run function"
        )
    ainvoke = getattr(built, "ainvoke", None)
    if callable(ainvoke):
        runnable: Runnable = ainvoke
        return runnable
    if callable(built):
        return built
    raise TypeError(
        f"the entrypoint returned a {type(built).__name__}; return an async run(input) function or an "
        "object with an async ainvoke(input) method"
    )


async def run_runnable(runnable: Runnable, value: Any) -> Any:
    """Await the runnable on the execution's input."""
    outcome = runnable(value)
    if not inspect.isawaitable(outcome):
        raise TypeError(
            f"the entrypoint's runnable returned a {type(outcome).__name__} instead of an awaitable; "
            "make run(input) an async function"
        )
    return await outcome
