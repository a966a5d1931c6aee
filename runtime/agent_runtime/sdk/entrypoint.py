"""Loading the tenant's `App` named by AGENT_ENTRYPOINT (`package.module:attribute`)."""

from __future__ import annotations

import importlib
import re

from agent_runtime.contract import ENTRYPOINT_ENV
from agent_runtime.sdk.app import App
from agent_runtime.sdk.input_schema import ToolDefinitionError

_SPEC = re.compile(
    r"^(?P<module>[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*):(?P<attr>[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*)$"
)


class EntrypointError(ToolDefinitionError):
    """AGENT_ENTRYPOINT cannot be loaded; the message names the value and the fix."""


def parse_entrypoint(spec: str) -> tuple[str, str]:
    """Split `package.module:app` into module and attribute path."""
    match = _SPEC.match(spec.strip())
    if match is None:
        raise EntrypointError(
            f"{ENTRYPOINT_ENV}={spec!r} is not of the form package.module:app; "
            "name the module that creates the App and the App's variable name"
        )
    return match["module"], match["attr"]


def load_app(spec: str) -> App:
    """Import the module and return its App; any import-time error is wrapped with the spec."""
    module_name, attr_path = parse_entrypoint(spec)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise EntrypointError(
            f"importing {module_name!r} for {ENTRYPOINT_ENV}={spec!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    target: object = module
    for part in attr_path.split("."):
        if not hasattr(target, part):
            raise EntrypointError(
                f"{ENTRYPOINT_ENV}={spec!r}: module {module_name!r} has no attribute {attr_path!r}; "
                "point it at the variable that holds the App"
            )
        target = getattr(target, part)
    if not isinstance(target, App):
        raise EntrypointError(
            f"{ENTRYPOINT_ENV}={spec!r} names a {type(target).__name__}, not an agent_runtime.sdk.App; "
            "point it at the App instance (app = App(...))"
        )
    return target
