"""The HTTP embeddings provider (Voyage's wire format) against a real loopback peer, directly and as the
Memory server's embedder."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agent_runtime.memory.embeddings import EmbeddingError, embedder_from_env
from agent_runtime.memory.http_embeddings import HttpEmbedder
from tests.conftest import free_port
from tests.integration.memory.launched import memory_process
from tests.providers.embeddings_provider import EmbeddingsPeer, hashed_vector, running_embeddings_provider

KEY = "voyage-test-key-5f2c9a"


@pytest.fixture
def peer() -> Iterator[EmbeddingsPeer]:
    with running_embeddings_provider(api_key=KEY, dimension=32) as running:
        yield running


def embedder(peer: EmbeddingsPeer, *, key: str = KEY, **options: object) -> HttpEmbedder:
    return HttpEmbedder(url=peer.base_url, model="voyage-3.5-lite", api_key=key, retry_s=0.01, **options)


def test_vectors_come_back_in_order_normalized_with_the_wire_fields(peer: EmbeddingsPeer) -> None:
    texts = [f"text number {i} about {'cats' if i % 2 else 'dogs'}" for i in range(300)]  # three batches

    async def scenario() -> np.ndarray:
        client = embedder(peer)
        try:
            assert client.dimension is None
            matrix = await client.embed(texts, input_type="query")
            assert client.dimension == 32
            return matrix
        finally:
            await client.aclose()

    matrix = asyncio.run(scenario())
    assert matrix.shape == (300, 32) and matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    expected = np.asarray(hashed_vector(texts[7], 32))
    assert np.allclose(matrix[7], expected / np.linalg.norm(expected), atol=1e-6)
    assert [len(r["body"]["input"]) for r in peer.requests] == [128, 128, 44]
    first = peer.requests[0]
    assert first["authorization"] == f"Bearer {KEY}"
    assert first["body"]["model"] == "voyage-3.5-lite" and first["body"]["input_type"] == "query"
    assert first["body"]["truncation"] is True and "output_dimension" not in first["body"]


def test_output_dimension_is_asked_for(peer: EmbeddingsPeer) -> None:
    async def scenario() -> np.ndarray:
        client = embedder(peer, output_dimension=8)
        try:
            return await client.embed(["hello"], input_type="document")
        finally:
            await client.aclose()

    assert asyncio.run(scenario()).shape == (1, 8)
    assert peer.requests[0]["body"]["output_dimension"] == 8


def test_rate_limits_and_server_errors_are_retried(peer: EmbeddingsPeer) -> None:
    peer.fail_next.extend([429, 503])

    async def scenario() -> np.ndarray:
        client = embedder(peer)
        try:
            return await client.embed(["retry me"], input_type="document")
        finally:
            await client.aclose()

    assert asyncio.run(scenario()).shape == (1, 32)
    assert len(peer.requests) == 3


@pytest.mark.parametrize(
    ("failures", "key", "status"),
    [([], "wrong-key", "401"), ([500, 500, 500], KEY, "500"), ([400], KEY, "400")],
)
def test_failures_name_the_status_never_the_key_or_body(
    peer: EmbeddingsPeer, failures: list[int], key: str, status: str
) -> None:
    peer.fail_next.extend(failures)

    async def scenario() -> None:
        client = embedder(peer, key=key)
        try:
            await client.embed(["x"], input_type="document")
        finally:
            await client.aclose()

    with pytest.raises(EmbeddingError) as caught:
        asyncio.run(scenario())
    message = str(caught.value)
    assert status in message and key not in message and "invalid" not in message and "later" not in message


def test_unreachable_provider_is_an_embedding_error() -> None:
    client = HttpEmbedder(url=f"http://127.0.0.1:{free_port()}/v1", model="m", api_key=KEY, retry_s=0.01)

    async def scenario() -> None:
        try:
            await client.embed(["x"], input_type="document")
        finally:
            await client.aclose()

    with pytest.raises(EmbeddingError, match="unreachable"):
        asyncio.run(scenario())


def test_settings_name_what_is_missing() -> None:
    with pytest.raises(ValueError, match="MEMORY_EMBEDDINGS_URL"):
        embedder_from_env({"MEMORY_EMBEDDINGS_PROVIDER": "http"})
    with pytest.raises(ValueError, match="VOYAGE_API_KEY") as caught:
        embedder_from_env(
            {"MEMORY_EMBEDDINGS_PROVIDER": "http", "MEMORY_EMBEDDINGS_URL": "http://127.0.0.1:1/v1"}
        )
    assert "secretEnv" in str(caught.value)
    with pytest.raises(ValueError, match="MEMORY_EMBEDDINGS_DIMENSION"):
        embedder_from_env(
            {
                "MEMORY_EMBEDDINGS_PROVIDER": "http",
                "MEMORY_EMBEDDINGS_URL": "http://127.0.0.1:1/v1",
                "MY_KEY": KEY,
                "MEMORY_EMBEDDINGS_API_KEY_ENV": "MY_KEY",
                "MEMORY_EMBEDDINGS_DIMENSION": "zero",
            }
        )
    with pytest.raises(ValueError, match="MEMORY_EMBEDDINGS_PROVIDER must be one of local, http"):
        embedder_from_env({"MEMORY_EMBEDDINGS_PROVIDER": "openai"})


def test_memory_server_with_the_http_provider(peer: EmbeddingsPeer, tmp_path: Path) -> None:
    settings = {
        "MEMORY_EMBEDDINGS_PROVIDER": "http",
        "MEMORY_EMBEDDINGS_URL": peer.base_url,
        "MEMORY_EMBEDDINGS_MODEL": "voyage-3.5-lite",
        "VOYAGE_API_KEY": KEY,
    }
    scope = {"namespace": "facts", "user_id": "u"}
    with memory_process(tmp_path, extra=settings) as server, server.client() as http:
        for key, text in {"a": "red apples and green pears", "b": "fast cars and slow trucks"}.items():
            written = http.post("/memory/semantic/records", json={**scope, "id": key, "content": text})
            assert (
                written.status_code == 201
                and written.json()["record"]["embedding_model"] == "voyage-3.5-lite"
            )
        hits = http.post(
            "/memory/semantic/search", json={**scope, "query": "green apples", "top_k": 1}
        ).json()
        assert [hit["id"] for hit in hits["results"]] == ["a"]
        assert [r["body"]["input_type"] for r in peer.requests] == ["document", "document", "query"]

        peer.fail_next.extend([503, 503, 503])
        failed = http.post("/memory/semantic/records", json={**scope, "id": "c", "content": "lost"})
        assert failed.status_code == 503 and failed.json()["error"] == "embeddings_unavailable"
        assert http.get("/memory/semantic/records/c", params=scope).status_code == 404
        output = server.process.output()
    assert KEY not in output and KEY not in failed.text
