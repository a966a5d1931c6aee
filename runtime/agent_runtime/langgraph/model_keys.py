"""Models built as LangChain's docs build them, in a process that holds no key (issue 31, finding 5).

The AER builds the same graph as the Tool Pod, so `ChatOpenAI(model="gpt-4o")` in the entrypoint runs
there too, and LangChain's clients refuse to construct without a key ("Missing credentials"). The AER
never sends a model call (the governed model asks the OE, which runs the model in the Tool Pod), so while
it builds the graph each conventional provider key variable that is unset, and the one
AGENTIC_LLM_API_KEY_ENV names, holds a placeholder that is not a key. The Tool Pod builds the model with
its real environment, where the Agent's key Secret is mounted, so the model reads its key there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

from agent_runtime.contract import LLM_API_KEY_ENV_ENV, RUNNER_MODE_ENV, RunnerMode

# Never a usable key: a provider answers 401 to it, and it names where the real one lives.
PLACEHOLDER = "agent-engine-aer-holds-no-key:the-model-runs-in-the-tool-pod"
PROVIDER_KEY_ENVS = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "COHERE_API_KEY",
    "FIREWORKS_API_KEY",
    "TOGETHER_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
)


def placeholder_keys(env: Mapping[str, str]) -> dict[str, str]:
    """The key variables to set to the placeholder in this process: none outside the AER."""
    if env.get(RUNNER_MODE_ENV, "").strip().lower() != RunnerMode.AER.value:
        return {}
    names = [*PROVIDER_KEY_ENVS, env.get(LLM_API_KEY_ENV_ENV, "").strip()]
    return {name: PLACEHOLDER for name in names if name and not env.get(name)}


def set_placeholder_keys(env: MutableMapping[str, str] | None = None) -> None:
    """Give the AER's unset key variables the placeholder (idempotent)."""
    target = os.environ if env is None else env
    target.update(placeholder_keys(target))
