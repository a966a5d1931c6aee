"""The OE's requests to an Agent's runtimes, authenticated with the Agent's runtime token through a rotation.

While a rotated token Secret reaches the Agent's pods (each kubelet at its own pace), a runtime may still
hold the token before the one the OE now knows. Its guard answers 401 before any handler runs, so the
request is sent again, unchanged, with each token the Agent held in its grace period
(`AgentRegistration.tokens`); nothing can run twice. No error or log here ever carries a token.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from agent_runtime.oe.registration import AgentRegistration


def runtime_headers(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}", "content-type": "application/json"}


@contextlib.asynccontextmanager
async def authorized(
    session: aiohttp.ClientSession, method: str, url: str, *, reg: AgentRegistration, **kwargs: Any
) -> AsyncIterator[aiohttp.ClientResponse]:
    """`session.request(method, url, **kwargs)` with the Agent's token; a 401 tries its previous tokens."""
    tokens = reg.tokens()
    for index, token in enumerate(tokens):
        async with session.request(method, url, headers=runtime_headers(token), **kwargs) as response:
            if response.status == 401 and index + 1 < len(tokens):
                continue
            yield response
            return
