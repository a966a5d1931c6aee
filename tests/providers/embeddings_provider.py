"""A loopback embeddings provider for tests: speaks Voyage's wire format (`POST /v1/embeddings`).

In-process: `with running_embeddings_provider(api_key=K) as peer: peer.base_url` (ends in `/v1`). As a
process: `python -m tests.providers.embeddings_provider --port N [--api-key K] [--dimension D]`.

Vectors are a deterministic hashed bag of words (each lower-cased word adds 1 to one of `dimension`
slots), so texts that share words are close and tests can predict rankings. `input_type` is recorded and
`output_dimension` honoured. `peer.fail_next` holds statuses to answer (in order) before serving again;
error bodies quote the credential the request carried, as careless providers do, so tests can prove the
client never repeats a body. Every request is recorded in `peer.requests`.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

EMBEDDINGS_PATH = "/v1/embeddings"
_WORD = re.compile(r"\w+", re.UNICODE)


def hashed_vector(text: str, dimension: int) -> list[float]:
    """The provider's embedding: word counts hashed into `dimension` slots."""
    vector = [0.0] * dimension
    for word in _WORD.findall(text.lower()):
        slot = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dimension
        vector[slot] += 1.0
    return vector


@dataclass
class EmbeddingsPeer:
    api_key: str | None = None
    dimension: int = 64
    fail_next: deque[int] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)
    base_url: str = ""

    async def embeddings(self, request: Request) -> Response:
        header = request.headers.get("authorization", "")
        body: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            body = await request.json()
        self.requests.append({"authorization": header, "body": body})
        if self.api_key is not None and header != f"Bearer {self.api_key}":
            return JSONResponse({"detail": f"Provided API key is invalid: {header[7:]}"}, status_code=401)
        if self.fail_next:
            status = self.fail_next.popleft()
            return JSONResponse({"detail": f"try again later (key {header[7:]})"}, status_code=status)
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return JSONResponse({"detail": "input must be a string or a non-empty list of strings"}, 400)
        if body.get("input_type") not in (None, "query", "document"):
            return JSONResponse({"detail": "input_type must be query, document or null"}, status_code=400)
        dimension = int(body.get("output_dimension") or self.dimension)
        data = [
            {"object": "embedding", "embedding": hashed_vector(text, dimension), "index": i}
            for i, text in enumerate(texts)
        ]
        # Out of order on purpose: clients must place vectors by `index`.
        data.reverse()
        tokens = sum(len(_WORD.findall(text)) for text in texts)
        return JSONResponse(
            {"object": "list", "data": data, "model": body.get("model"), "usage": {"total_tokens": tokens}}
        )

    def app(self) -> Starlette:
        return Starlette(routes=[Route(EMBEDDINGS_PATH, self.embeddings, methods=["POST"])])


@contextlib.contextmanager
def running_embeddings_provider(
    *, api_key: str | None = None, dimension: int = 64, host: str = "127.0.0.1"
) -> Iterator[EmbeddingsPeer]:
    """Serve a peer on a free loopback port in a thread; yield it; stop it."""
    peer = EmbeddingsPeer(api_key=api_key, dimension=dimension)
    config = uvicorn.Config(peer.app(), host=host, port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the embeddings provider did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    peer.base_url = f"http://{host}:{port}/v1"
    try:
        yield peer
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", choices=["127.0.0.1", "::1", "localhost"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key")
    parser.add_argument("--dimension", type=int, default=64)
    args = parser.parse_args()
    peer = EmbeddingsPeer(api_key=args.api_key, dimension=args.dimension)
    uvicorn.run(peer.app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
