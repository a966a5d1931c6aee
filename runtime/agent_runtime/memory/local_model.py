"""The default embedder: WordLlama's `l2_supercat` 256-dimension static token embeddings, whose weights
(16 MB) and tokenizer ship inside the `wordllama` wheel. Loaded from the package directory only: nothing
is ever downloaded, so it works with no network at all.

A static model averages token vectors: it captures topic and wording well and word order not at all, at
about 20 µs a sentence on one core, where a transformer of the same quality needs a GPU or ~100x the CPU.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread
import numpy as np

from agent_runtime.memory.embedder import EmbeddingError, InputType
from agent_runtime.memory.vectors import Matrix

MODEL_ID = "wordllama/l2_supercat-256"
DIMENSION = 256
_WEIGHTS = "weights/l2_supercat_256.safetensors"
_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
# Small batches are cheaper inline than a hop to a worker thread.
_INLINE_TEXTS = 32


def _import_quietly() -> None:
    """Import wordllama, undoing the `logging.basicConfig(level=INFO)` it runs at import time: that would
    give a process without logging set up a root handler printing every library's INFO records."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama.inference  # noqa: F401
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


def _load() -> Any:
    try:
        _import_quietly()
        import wordllama
        from safetensors import safe_open
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference
    except ImportError as exc:
        raise EmbeddingError(
            f"the local embedding model needs the 'wordllama' package ({exc.name} is missing); install the "
            "runtime extra, or set MEMORY_EMBEDDINGS_PROVIDER=http"
        ) from None
    root = Path(wordllama.__file__).parent
    weights, tokenizer = root / _WEIGHTS, root / _TOKENIZER
    for path in (weights, tokenizer):
        if not path.is_file():
            raise EmbeddingError(f"the wordllama package has no {path.relative_to(root)}; reinstall it")
    with safe_open(str(weights), framework="np") as tensors:
        matrix = tensors.get_tensor("embedding.weight")
    return WordLlamaInference(matrix, Tokenizer.from_file(str(tokenizer)))


class LocalEmbedder:
    """`Embedder` over the packaged WordLlama model, loaded once on first use (about 0.3 s)."""

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dimension(self) -> int:
        return DIMENSION

    def load(self) -> None:
        """Load the model now (the server does it at start-up, so the first call is not slow)."""
        with self._lock:
            if self._model is None:
                self._model = _load()

    def embed_sync(self, texts: Sequence[str]) -> Matrix:
        if self._model is None:
            self.load()
        vectors = np.asarray(self._model.embed(list(texts), norm=True), dtype=np.float32)
        # A text of no known token averages to zero; keep it a zero row, which matches nothing.
        return np.nan_to_num(vectors, copy=False)

    async def embed(self, texts: Sequence[str], *, input_type: InputType) -> Matrix:
        # A static model embeds queries and documents alike.
        if len(texts) <= _INLINE_TEXTS and self._model is not None:
            return self.embed_sync(texts)
        return await anyio.to_thread.run_sync(self.embed_sync, texts)

    async def aclose(self) -> None:
        self._model = None
