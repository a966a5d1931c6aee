"""The packaged local embedding model: loads from the wheel alone and ranks paraphrases first."""

from __future__ import annotations

import asyncio

import numpy as np

from agent_runtime.memory.local_model import DIMENSION, MODEL_ID, LocalEmbedder


def test_embeds_normalized_vectors_and_ranks_paraphrases() -> None:
    texts = [
        "The cat sat on the mat.",
        "A kitten was resting on the rug.",
        "Interest rates rose sharply this quarter.",
        "zzqx",  # no known word: still one row, and no NaN
    ]
    embedder = LocalEmbedder()
    matrix = asyncio.run(embedder.embed(texts, input_type="document"))
    assert embedder.model_id == MODEL_ID and matrix.shape == (4, DIMENSION)
    assert not np.isnan(matrix).any()
    assert np.allclose(np.linalg.norm(matrix[:3], axis=1), 1.0, atol=1e-5)
    similarity = matrix[:3] @ matrix[:3].T
    assert similarity[0, 1] > similarity[0, 2] and similarity[1, 0] > similarity[1, 2]
