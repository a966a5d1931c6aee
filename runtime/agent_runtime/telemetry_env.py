"""Which telemetry variables the platform passes on to every component (issue 33): the standard `OTEL_*`
ones and the platform's tracing and execution-log settings, nothing else.

The chart renders its `observability` values into the OE's environment and, as one JSON object
(`AGENT_OPERATOR_TELEMETRY_ENV`), into the operator's, which renders the same variables into each Agent's
AER, Tool Pod and Memory server (`component_env`). `telemetry_env` checks the object: a name outside these
prefixes, or a value that is not a string, is refused naming the setting and the fix, so a values file can
never smuggle another variable (a credential, RUNNER_MODE) into the Agents' pods.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

ALLOWED_PREFIXES = ("OTEL_", "AGENTIC_TRACING_", "AGENTIC_EXECUTION_LOG")
# OTLP headers and certificates carry credentials or file paths of the OE's pod, not an Agent's.
_REFUSED = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")


def telemetry_env(raw: str, *, setting: str) -> dict[str, str]:
    """The variables a JSON object names, checked (see the module docstring); `{}` for empty text."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        example = '{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}'
        raise ValueError(f"{setting}: not JSON; write an object such as {example}") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"{setting}: must be a JSON object of variable names to string values")
    return checked(value, setting=setting)


def checked(value: Mapping[str, object], *, setting: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name.startswith(ALLOWED_PREFIXES) or name in _REFUSED:
            raise ValueError(
                f"{setting}: {name!r} is not a telemetry variable; only {', '.join(ALLOWED_PREFIXES)}* "
                "(less the OTLP headers) reach the Agents' components"
            )
        if not isinstance(item, str):
            raise ValueError(f"{setting}: {name} must be a string (quote numbers and booleans)")
        out[name] = item
    return out
