"""A tenant tool's input schema and argument validator, derived from its function's type hints."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model


class ToolDefinitionError(ValueError):
    """A tenant tool or entrypoint is declared in a way the runtime cannot serve; the message says the fix."""


def arguments_model(func: Callable[..., Any], *, tool_name: str) -> type[BaseModel]:
    """A pydantic model with one field per parameter; unknown arguments are rejected by name."""
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except (NameError, TypeError) as exc:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: its type hints cannot be resolved ({exc}); "
            "use types importable at module level"
        ) from exc
    fields: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} is *args/**kwargs; "
                "declare each argument as a named, annotated parameter"
            )
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} is positional-only; "
                "tools are called with named arguments, remove the '/'"
            )
        if param.name not in hints:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} has no type hint; annotate it "
                f"(for example `{param.name}: str`) so its input schema can be derived"
            )
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints[param.name], default)
    try:
        return create_model(  # type: ignore[call-overload,no-any-return]
            f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
    except (TypeError, ValueError, NameError) as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: cannot build its input schema: {exc}") from exc


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """JSON Schema of the arguments object, without pydantic's generated model title."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return schema
