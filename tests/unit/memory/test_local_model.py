"""The packaged local embedding models: each loads from its wheel alone and ranks paraphrases first."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import numpy as np
import pytest

from agent_runtime.memory import minilm
from agent_runtime.memory.embedder import EmbeddingError
from agent_runtime.memory.embeddings import embedder_from_env
from agent_runtime.memory.local_model import LocalEmbedder
from agent_runtime.memory.minilm import MiniLMEmbedder

TEXTS = [
    "The cat sat on the mat.",
    "A kitten was resting on the rug.",
    "Interest rates rose sharply this quarter.",
    "zzqx",  # no known word: still one row, and no NaN
]


@pytest.mark.parametrize(
    ("setting", "model_id", "dimension"),
    [("", "all-MiniLM-L6-v2/onnx-int8", 384), ("wordllama", "wordllama/l2_supercat-256", 256)],
)
def test_embeds_normalized_vectors_and_ranks_paraphrases(setting: str, model_id: str, dimension: int) -> None:
    embedder = embedder_from_env({"MEMORY_EMBEDDINGS_LOCAL_MODEL": setting})
    matrix = asyncio.run(embedder.embed(TEXTS, input_type="document"))
    assert embedder.model_id == model_id and embedder.dimension == dimension
    assert matrix.shape == (4, dimension) and matrix.dtype == np.float32
    assert not np.isnan(matrix).any()
    assert np.allclose(np.linalg.norm(matrix[:3], axis=1), 1.0, atol=1e-5)
    similarity = matrix[:3] @ matrix[:3].T
    assert similarity[0, 1] > similarity[0, 2] and similarity[1, 0] > similarity[1, 2]


def test_the_default_is_minilm_and_a_bad_setting_names_the_variable() -> None:
    assert isinstance(embedder_from_env({}), MiniLMEmbedder)
    assert isinstance(embedder_from_env({"MEMORY_EMBEDDINGS_LOCAL_MODEL": "WordLlama"}), LocalEmbedder)
    with pytest.raises(ValueError, match="MEMORY_EMBEDDINGS_LOCAL_MODEL must be one of minilm, wordllama"):
        embedder_from_env({"MEMORY_EMBEDDINGS_LOCAL_MODEL": "bert"})


def test_batches_embed_each_text_as_it_would_be_alone() -> None:
    """Padding to the longest text of a batch must not move any vector (the mask keeps pads out)."""
    embedder = MiniLMEmbedder()
    texts = ["short", "a somewhat longer sentence about the weather in spring", *TEXTS]
    together = embedder.embed_sync(texts)
    alone = np.vstack([embedder.embed_sync([text]) for text in texts])
    assert np.allclose(together, alone, atol=1e-4)


def test_long_text_is_cut_not_refused() -> None:
    vector = MiniLMEmbedder().embed_sync(["word " * 5000])
    assert vector.shape == (1, 384) and abs(float(np.linalg.norm(vector)) - 1) < 1e-5


async def _concurrently(embedder: MiniLMEmbedder, texts: list[str]) -> list[np.ndarray]:
    return await asyncio.gather(*(embedder.embed([text], input_type="document") for text in texts))


def test_concurrent_calls_run_as_one_batch_and_each_gets_its_own_rows() -> None:
    embedder = MiniLMEmbedder()
    embedder.load()
    batches: list[int] = []
    run = embedder.embed_sync

    def counted(texts: list[str]) -> np.ndarray:
        batches.append(len(texts))
        return run(texts)

    embedder._coalescer._embed_sync = counted  # count the model runs, the real model still runs them
    texts = [f"memory number {i} about topic {i % 7}" for i in range(20)]
    rows = asyncio.run(_concurrently(embedder, texts))
    assert len(batches) < len(texts) and sum(batches) == len(texts)
    expected = run(texts)
    for i, row in enumerate(rows):
        assert row.shape == (1, 384) and np.allclose(row[0], expected[i], atol=1e-4)


def test_weights_other_than_the_pinned_ones_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tampered = tmp_path / "model.onnx"
    shutil.copyfile(minilm.model_file(), tampered)
    with tampered.open("r+b") as handle:
        handle.seek(-1, 2)
        last = handle.read(1)
        handle.seek(-1, 2)
        handle.write(bytes([last[0] ^ 1]))
    monkeypatch.setattr(minilm, "model_file", lambda: tampered)
    with pytest.raises(EmbeddingError, match="sha256 differs"):
        MiniLMEmbedder().load()
