"""The runtime's LLM client: platform message dicts and an OpenAI-compatible chat-completions model.

Below the SDK and the servers: this package imports only the protocol, the contract and redaction.
"""

from agent_runtime.llm.chat_completions import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TIMEOUT_S,
    ChatCompletionsModel,
)
from agent_runtime.llm.errors import LLMError, LLMErrorCategory
from agent_runtime.llm.messages import (
    MESSAGE_TYPES,
    Message,
    MessageError,
    ResponseShapeError,
    StreamCollector,
    ai_message,
    ai_message_from_chunks,
    ai_message_from_completion,
    chat_completion_request,
    normalize_messages,
    to_openai_messages,
    to_openai_tools,
)

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT_S",
    "MESSAGE_TYPES",
    "ChatCompletionsModel",
    "LLMError",
    "LLMErrorCategory",
    "Message",
    "MessageError",
    "ResponseShapeError",
    "StreamCollector",
    "ai_message",
    "ai_message_from_chunks",
    "ai_message_from_completion",
    "chat_completion_request",
    "normalize_messages",
    "to_openai_messages",
    "to_openai_tools",
]
