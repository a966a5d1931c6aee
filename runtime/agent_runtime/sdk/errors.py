"""What an intercepted tool or LLM call raises in agent code (B-07, LG-08).

A tool failure (`ToolExecutionError`) and a policy denial (`PolicyDeniedException`) are ordinary
exceptions: the call never ran or failed on its own, so the model may be told and the turn goes on.
A platform failure and a suspension are not failures of the agent's logic. They derive from
BaseException, as `asyncio.CancelledError` does, so that agent code's `except Exception` (and a framework's
"report every tool error to the model") cannot swallow them: a lost OE answer must end the turn (the tool
may have run, LG-08) and a suspension must reach the AER's runner to be reported as SUSPENDED.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.protocol import CallError, ToolExecuteRequest


class PolicyDeniedException(Exception):
    """The OE refused the call before anything ran; `reason` is safe to show to the model."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ToolExecutionError(Exception):
    """The call ran (or was attempted) and failed; `error` is the classified, credential-free outcome."""

    def __init__(self, error: CallError) -> None:
        super().__init__(f"{error.category}: {error.explanation}" if error.explanation else error.category)
        self.error = error


class ToolError(Exception):
    """Raised by a tool body to tell the model something: its message reaches the model verbatim (after the
    removal of known secret values). Any other exception a tool raises reaches the model as its type only."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = str(message)


class PlatformFailure(BaseException):
    """The platform lost or refused a call's outcome; the turn ends FAILED and the model never sees it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SuspendRequested(BaseException):
    """The execution must wait for a human: raised by `app.suspend` or by an OE `suspend` answer."""

    def __init__(
        self,
        reason: str,
        payload: Any = None,
        *,
        step: int | None = None,
        tool: str | None = None,
        pending: ToolExecuteRequest | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.payload = payload
        self.step = step
        self.tool = tool
        # An agent-level `app.suspend` the OE has not heard of yet: the runner sends this step first.
        self.pending = pending

    @classmethod
    def from_result(cls, result: Any, *, step: int, tool: str) -> SuspendRequested:
        """The signal from a `suspend` answer's result: `{reason, payload}`, or an OE approval payload."""
        if isinstance(result, dict) and isinstance(result.get("reason"), str):
            return cls(result["reason"], result.get("payload"), step=step, tool=tool)
        kind = result.get("kind") if isinstance(result, dict) else None
        return cls(kind if isinstance(kind, str) else "suspended", result, step=step, tool=tool)

    def metadata(self) -> dict[str, Any]:
        """The SUSPENDED callback's metadata."""
        data: dict[str, Any] = {"reason": self.reason, "payload": self.payload}
        if self.step is not None:
            data["step"] = self.step
        if self.tool is not None:
            data["tool"] = self.tool
        return data
