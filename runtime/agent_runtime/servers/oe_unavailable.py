"""The OE's answer while its store is away (a restarting PostgreSQL, a partition): 503 with Retry-After.

Every OE write is safe to repeat (claims under unique keys, compare-and-set transitions), so a client or
runtime that sends again after Retry-After gets the answer it would have had; never a 500.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agent_runtime.oe.client_auth import unavailable_body
from agent_runtime.oe.store.unavailable import RETRY_AFTER_S, StoreUnavailable

logger = logging.getLogger(__name__)


async def store_unavailable(request: Request, exc: Exception) -> Response:
    logger.warning("%s %s: the store is unavailable: %s", request.method, request.url.path, exc)
    return JSONResponse(
        unavailable_body(f"the OE's store is unavailable; retry in {RETRY_AFTER_S} s"),
        status_code=503,
        headers={"retry-after": str(RETRY_AFTER_S)},
    )


EXCEPTION_HANDLERS = {StoreUnavailable: store_unavailable}
