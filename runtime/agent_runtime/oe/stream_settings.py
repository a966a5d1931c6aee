"""The OE's streaming settings (issue 32), read once from its environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agent_runtime.oe.event_retention import EventRetention
from agent_runtime.oe.settings import SettingsError
from agent_runtime.oe.step_content import DEFAULT_MAX_BYTES
from agent_runtime.oe.streams import DEFAULT_BUFFER

STEP_RESULTS_ENV = "OE_STEP_RESULTS"
STEP_RESULT_MAX_BYTES_ENV = "OE_STEP_RESULT_MAX_BYTES"
EVENT_BUFFER_ENV = "OE_EVENT_BUFFER"


class StreamSettingsError(SettingsError):
    """A streaming setting is malformed; the message names the variable and the fix."""


@dataclass(frozen=True)
class StreamSettings:
    step_results: bool = True  # step_finished events carry the step's result (off: status only)
    step_result_max_bytes: int = DEFAULT_MAX_BYTES
    subscriber_buffer: int = DEFAULT_BUFFER  # events one event-stream client may fall behind
    retention: EventRetention = field(default_factory=EventRetention)  # how long stream events stay

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StreamSettings:
        raw = env.get(STEP_RESULTS_ENV, "").strip().lower()
        if raw not in ("", "on", "off", "true", "false"):
            raise StreamSettingsError(f"{STEP_RESULTS_ENV}={raw!r}: write on or off")
        return cls(
            step_results=raw not in ("off", "false"),
            step_result_max_bytes=_positive(env, STEP_RESULT_MAX_BYTES_ENV, DEFAULT_MAX_BYTES),
            subscriber_buffer=_positive(env, EVENT_BUFFER_ENV, DEFAULT_BUFFER),
            retention=EventRetention.from_env(env),
        )


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise StreamSettingsError(f"{name}={raw!r} is not a whole number of 1 or more")
    return int(raw)
