"""Embeddings (M-06, Decision 13): the choice between the local model and an HTTP provider.

`MEMORY_EMBEDDINGS_PROVIDER=local` (the default) runs a small model shipped inside a Python package, with
no network at all: `MEMORY_EMBEDDINGS_LOCAL_MODEL=minilm` (the default, all-MiniLM-L6-v2 on onnxruntime)
or `wordllama` (static token embeddings: lighter and faster, weaker on paraphrases); `http` calls a
Voyage-compatible `POST {MEMORY_EMBEDDINGS_URL}/embeddings`.
"""

from __future__ import annotations

from collections.abc import Mapping

# The interface lives below the embedders (memory/embedder.py); re-exported here for the callers that choose.
from agent_runtime.memory.embedder import Embedder, EmbeddingError, InputType

__all__ = ["Embedder", "EmbeddingError", "InputType", "embedder_from_env"]

PROVIDER_ENV = "MEMORY_EMBEDDINGS_PROVIDER"
URL_ENV = "MEMORY_EMBEDDINGS_URL"
MODEL_ENV = "MEMORY_EMBEDDINGS_MODEL"
API_KEY_ENV_ENV = "MEMORY_EMBEDDINGS_API_KEY_ENV"
DIMENSION_ENV = "MEMORY_EMBEDDINGS_DIMENSION"
DEFAULT_API_KEY_ENV = "VOYAGE_API_KEY"
DEFAULT_HTTP_MODEL = "voyage-3.5-lite"
LOCAL_MODEL_ENV = "MEMORY_EMBEDDINGS_LOCAL_MODEL"
PROVIDERS = ("local", "http")
LOCAL_MODELS = ("minilm", "wordllama")


def embedder_from_env(env: Mapping[str, str]) -> Embedder:
    """The embedder the settings name; a ValueError names the variable to fix."""
    provider = env.get(PROVIDER_ENV, "").strip().lower() or "local"
    if provider == "local":
        local = env.get(LOCAL_MODEL_ENV, "").strip().lower() or "minilm"
        if local == "minilm":
            from agent_runtime.memory.minilm import MiniLMEmbedder

            return MiniLMEmbedder()
        if local == "wordllama":
            from agent_runtime.memory.local_model import LocalEmbedder

            return LocalEmbedder()
        raise ValueError(f"{LOCAL_MODEL_ENV} must be one of {', '.join(LOCAL_MODELS)}, got {local!r}")
    if provider in ("http", "voyage"):
        from agent_runtime.memory.http_embeddings import HttpEmbedder

        url = env.get(URL_ENV, "").strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ValueError(
                f"{PROVIDER_ENV}={provider} needs {URL_ENV}: the provider's base URL, e.g. "
                "https://api.example.com/v1 (embeddings are posted to {URL}/embeddings)"
            )
        key_env = env.get(API_KEY_ENV_ENV, "").strip() or DEFAULT_API_KEY_ENV
        api_key = env.get(key_env, "").strip()
        if not api_key:
            raise ValueError(
                f"{PROVIDER_ENV}={provider} needs an API key in {key_env} (name another variable with "
                f"{API_KEY_ENV_ENV}); deliver it to the Memory pod through spec.components.memory.secretEnv"
            )
        raw_dimension = env.get(DIMENSION_ENV, "").strip()
        if raw_dimension and not (raw_dimension.isdigit() and 0 < int(raw_dimension) <= 8192):
            raise ValueError(f"{DIMENSION_ENV} must be a whole number 1-8192, got {raw_dimension!r}")
        return HttpEmbedder(
            url=url,
            model=env.get(MODEL_ENV, "").strip() or DEFAULT_HTTP_MODEL,
            api_key=api_key,
            output_dimension=int(raw_dimension) if raw_dimension else None,
        )
    raise ValueError(f"{PROVIDER_ENV} must be one of {', '.join(PROVIDERS)}, got {provider!r}")
