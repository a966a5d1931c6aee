"""The OE's requests to an Agent's runtimes: the OE's signed statement first, the Agent's token after.

Every call carries a statement the OE signs for that call (`agent_runtime.execution_token`: the audience,
the Agent, the execution, its user and org), which only the OE can make: the AER cannot forge one for its
Tool Pod, nor replay the one it was given (another audience). Runtimes with the OE's public key accept
nothing else on the routes the OE drives (issue 27).

A 401 comes from a runtime's guard before any handler ran, so the request is sent again, unchanged: with
the statement signed by the OE's previous key while its grace lasts (a pod whose mounted public key has not
changed yet), then with each runtime token the Agent held in its grace period (`AgentRegistration.tokens`;
a runtime without the OE's public key, during an upgrade or a local run). Nothing can run twice. No error
or log here ever carries a token or a statement.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from agent_runtime import tracing
from agent_runtime.execution_token import Audience
from agent_runtime.oe.registration import AgentRegistration


def runtime_headers(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}", "content-type": "application/json"}


def credentials(
    reg: AgentRegistration,
    *,
    audience: Audience,
    execution_id: str = "",
    user_id: str | None = None,
    org_id: str | None = None,
) -> tuple[str, ...]:
    """What to present to `audience`, in order (see the module docstring)."""
    statements = reg.statements(audience, execution_id=execution_id, user_id=user_id, org_id=org_id)
    return (*statements, *reg.tokens())


@contextlib.asynccontextmanager
async def authorized(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    reg: AgentRegistration,
    audience: Audience,
    execution_id: str = "",
    user_id: str | None = None,
    org_id: str | None = None,
    accept: str | None = None,
    **kwargs: Any,
) -> AsyncIterator[aiohttp.ClientResponse]:
    """`session.request(method, url, **kwargs)` with the OE's statement for `audience`; a 401 tries the
    next credential. `accept`: the media type asked for (a streamed model call's NDJSON)."""
    offered = credentials(reg, audience=audience, execution_id=execution_id, user_id=user_id, org_id=org_id)
    for index, credential in enumerate(offered):
        headers = runtime_headers(credential)
        if accept is not None:
            headers["accept"] = accept
        tracing.inject(headers)  # the traceparent to the AER and the Tool Pod
        async with session.request(method, url, headers=headers, **kwargs) as response:
            if response.status == 401 and index + 1 < len(offered):
                continue
            yield response
            return
