"""The embedder interface (M-06): what every embedder is, below the embedders and the choice between them.

Its own module so that `local_model` and `http_embeddings` import the interface without importing
`embeddings`, which imports them to choose one (issue 42: no import cycle).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from agent_runtime.memory.vectors import Matrix

InputType = Literal["document", "query"]


class EmbeddingError(RuntimeError):
    """The embedder could not embed; the message says why without the key or the provider's answer body."""


class Embedder(Protocol):
    """Turns texts into unit-length vectors of one model's space."""

    @property
    def model_id(self) -> str:
        """The vector space: records embedded by another model are never compared with this one's."""

    @property
    def dimension(self) -> int | None:
        """Length of its vectors (None until an HTTP provider has answered once)."""

    async def embed(self, texts: Sequence[str], *, input_type: InputType) -> Matrix:
        """One normalized float32 row per text, in order."""

    async def aclose(self) -> None: ...
