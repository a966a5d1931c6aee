"""The Tool Pod's span for one model call (GenAI semantic conventions), which is also its provider request's.

The span names the platform's model id; the model that answered, the tokens it reports and the error
category go on as attributes. Never the messages or the answer (see agent_runtime.tracing).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agent_runtime import tracing
from agent_runtime.protocol import CallOutcome, InvokeLLMRequest


async def traced_model_call(call: InvokeLLMRequest, run: Callable[[], Awaitable[CallOutcome]]) -> CallOutcome:
    """`run()` under a `chat <llm_id>` client span when tracing is on; `run()` alone otherwise."""
    if not tracing.enabled():
        return await run()
    # The execution, step and model id are the parent's (the OE's step span) and the name's: every
    # attribute is encoded and sent once per call, so none is said twice.
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
    with tracing.model_call_span(f"chat {call.llm_id}", attributes=attributes):
        outcome = await run()
        tracing.set_attributes(outcome_attributes(outcome))
        if outcome.error is not None:
            tracing.mark_error(outcome.error.category)
        return outcome


def outcome_attributes(outcome: CallOutcome) -> dict[str, Any]:
    """The model, finish reason and token counts a model call's outcome reports (pure)."""
    message = outcome.result if isinstance(outcome.result, dict) else {}
    metadata = message.get("response_metadata") if isinstance(message.get("response_metadata"), dict) else {}
    usage = message.get("usage_metadata") if isinstance(message.get("usage_metadata"), dict) else {}
    details = usage.get("input_token_details") if isinstance(usage.get("input_token_details"), dict) else {}
    model = metadata.get("model_name")
    finish = metadata.get("finish_reason")
    out: dict[str, Any] = {
        "gen_ai.request.model": model if isinstance(model, str) else None,
        "gen_ai.response.model": model if isinstance(model, str) else None,
        "gen_ai.response.finish_reasons": [finish] if isinstance(finish, str) else None,
        "gen_ai.usage.input_tokens": usage.get("input_tokens"),
        "gen_ai.usage.output_tokens": usage.get("output_tokens"),
        "gen_ai.usage.cache_read.input_tokens": details.get("cache_read") or None,  # absent: none cached
    }
    return {key: value for key, value in out.items() if isinstance(value, str | int | list)}
