"""Classified LLM call failures whose text is safe for logs, the audit log and the model."""

from __future__ import annotations

from enum import StrEnum

from agent_runtime.protocol import CallError


class LLMErrorCategory(StrEnum):
    """Why a model call failed; callers decide on retries by category, never by message text."""

    AUTH = "auth"  # 401/403
    RATE_LIMITED = "rate_limited"  # 429
    SERVER_ERROR = "server_error"  # 5xx, or an error event inside a stream
    CLIENT_ERROR = "client_error"  # any other 4xx
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    BAD_RESPONSE = "bad_response"  # not JSON, wrong shape, too large
    STREAM_DROPPED = "stream_dropped"  # the stream broke or ended without [DONE]
    CREDENTIAL_MISSING = "credential_missing"  # the env var named for the key is unset or empty


class LLMError(Exception):
    """A failed model call. The explanation never holds the API key or the provider's response body."""

    def __init__(
        self,
        category: LLMErrorCategory | str,
        explanation: str,
        *,
        status_code: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        self.category = LLMErrorCategory(category)
        self.explanation = explanation
        self.status_code = status_code
        self.retry_after_s = retry_after_s
        super().__init__(f"{self.category.value}: {explanation}")

    def __repr__(self) -> str:
        return f"LLMError({self.category.value!r}, {self.explanation!r}, status_code={self.status_code!r})"

    @property
    def retryable(self) -> bool:
        """Whether the same call may succeed later without anyone changing anything."""
        return self.category in _RETRYABLE

    def to_call_error(self) -> CallError:
        """The wire form the Tool Pod answers with."""
        return CallError(
            category=self.category.value, explanation=self.explanation, status_code=self.status_code
        )


_RETRYABLE = frozenset(
    {
        LLMErrorCategory.RATE_LIMITED,
        LLMErrorCategory.SERVER_ERROR,
        LLMErrorCategory.TIMEOUT,
        LLMErrorCategory.CONNECTION,
        LLMErrorCategory.STREAM_DROPPED,
    }
)
