"""An HTTP embeddings provider in Voyage's wire format (`POST {url}/embeddings`).

    request:  {"input": [texts], "model": m, "input_type": "document" | "query", "truncation": true,
               "output_dimension"?: n}      with `Authorization: Bearer <key>`
    answer:   {"object": "list", "data": [{"object": "embedding", "embedding": [...], "index": i}], ...}

Rate limits and server errors are retried briefly; any other failure is an `EmbeddingError` that names
the status, never the key or the answer's body.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from agent_runtime.memory.embedder import EmbeddingError, InputType
from agent_runtime.memory.vectors import Matrix

BATCH_SIZE = 128
TIMEOUT_S = 30.0
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_ATTEMPTS = 3


class HttpEmbedder:
    """`Embedder` over a Voyage-compatible endpoint."""

    def __init__(
        self, *, url: str, model: str, api_key: str, output_dimension: int | None = None, retry_s: float = 0.2
    ) -> None:
        self._url = f"{url.rstrip('/')}/embeddings"
        self._model = model
        self._output_dimension = output_dimension
        self._dimension = output_dimension
        self._retry_s = retry_s
        self._client = httpx.AsyncClient(
            timeout=TIMEOUT_S, headers={"authorization": f"Bearer {api_key}"}, follow_redirects=False
        )

    def __repr__(self) -> str:
        return f"HttpEmbedder(model={self._model!r})"

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def dimension(self) -> int | None:
        return self._dimension

    async def embed(self, texts: Sequence[str], *, input_type: InputType) -> Matrix:
        rows: list[Matrix] = []
        for start in range(0, len(texts), BATCH_SIZE):
            rows.append(await self._batch(list(texts[start : start + BATCH_SIZE]), input_type))
        matrix = np.vstack(rows) if rows else np.empty((0, self._dimension or 0), dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)

    async def _batch(self, texts: list[str], input_type: InputType) -> Matrix:
        body: dict[str, Any] = {
            "input": texts,
            "model": self._model,
            "input_type": input_type,
            "truncation": True,
        }
        if self._output_dimension is not None:
            body["output_dimension"] = self._output_dimension
        for attempt in range(_ATTEMPTS):
            try:
                response = await self._client.post(self._url, json=body)
            except httpx.HTTPError as exc:
                if attempt + 1 == _ATTEMPTS:
                    raise EmbeddingError(
                        f"embeddings provider unreachable ({type(exc).__name__}); check MEMORY_EMBEDDINGS_URL"
                    ) from None
            else:
                if response.status_code == 200:
                    return self._parse(response, len(texts))
                if response.status_code not in _RETRY_STATUS or attempt + 1 == _ATTEMPTS:
                    hint = " (check the API key)" if response.status_code in (401, 403) else ""
                    raise EmbeddingError(f"embeddings provider answered {response.status_code}{hint}")
            await asyncio.sleep(self._retry_s * 2**attempt)
        raise EmbeddingError("embeddings provider gave no answer")  # not reached: the loop raises

    def _parse(self, response: httpx.Response, expected: int) -> Matrix:
        try:
            data = response.json()["data"]
            ordered = sorted(data, key=lambda item: int(item["index"]))
            matrix = np.asarray([item["embedding"] for item in ordered], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(
                f"embeddings provider answered a malformed body ({type(exc).__name__})"
            ) from None
        if matrix.ndim != 2 or matrix.shape[0] != expected:
            got = matrix.shape[0] if matrix.ndim else 0
            raise EmbeddingError(f"embeddings provider answered {got} vectors for {expected} texts")
        if self._dimension is None:
            self._dimension = int(matrix.shape[1])
        elif matrix.shape[1] != self._dimension:
            raise EmbeddingError(
                f"embeddings provider answered {matrix.shape[1]} dimensions, earlier {self._dimension}"
            )
        return matrix

    async def aclose(self) -> None:
        await self._client.aclose()
