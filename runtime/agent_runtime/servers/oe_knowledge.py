"""The client API's knowledge routes: a caller's documents, checked, forwarded to the Agent's Memory server.

`POST|GET|DELETE /api/v1/projects/{project_id}/agents/{agent}/knowledge/documents` (issue 37). Writing or
forgetting a document changes what the Agent answers, as editing its spec does, so it needs `update` on the
Agent itself (`agents`, the verb of Kubernetes' `edit` and `admin` roles), not the invoker's right. Listing
needs `get` on the Agent. The OE reaches the Memory server at the registration's `memoryUrl` with its own
credential: a statement it signs for that Agent (audience `memory`, purpose `knowledge`, a minute's life),
which opens the Memory server's documents routes and nothing else (servers/memory_auth.py). Refused with
401 (a Memory server without the OE's public key: a local run, an upgrade), it falls back to the Agent's
runtime token, the order `oe/runtime_auth.py` uses for the AER and the Tool Pod. No user statement is sent,
since knowledge belongs to the Agent. An Agent without a Memory server is a 409; a Memory server the OE cannot
reach, or one that refuses the OE, is a 502 naming it. Nothing here logs or returns a token or a
document's text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import httpx
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.memory.knowledge_wire import MAX_INGEST_BODY_BYTES, IngestBody
from agent_runtime.oe.client_auth import KNOWLEDGE_READ, KNOWLEDGE_WRITE, Attributes, on_agents
from agent_runtime.oe.errors import UnknownAgent
from agent_runtime.oe.registration import AgentRegistration

OE_KNOWLEDGE_PATH = "/api/v1/projects/{project_id}/agents/{agent}/knowledge/documents"
MEMORY_PATH = "/knowledge/documents"
TIMEOUT_S = 300.0  # an ingest embeds the whole document before the Memory server answers

Handler = Callable[[Request], Awaitable[Response]]


class _Registry(Protocol):
    def get(self, agent: str) -> AgentRegistration | None: ...


class _Engine(Protocol):
    @property
    def registry(self) -> _Registry: ...


def _refusal(status: int, error: str, detail: Any) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail}, status_code=status)


def _problems(exc: ValidationError) -> list[dict[str, str]]:
    """Pydantic errors as {field, problem}, without the offending input (a document's text)."""
    return [
        {"field": ".".join(str(part) for part in error["loc"]) or "body", "problem": error["msg"]}
        for error in exc.errors(include_input=False, include_url=False)
    ]


def _bad_gateway(agent: str, url: str, why: str) -> JSONResponse:
    return _refusal(
        502,
        "memory_server_unreachable",
        f"the Memory server of Agent {agent} at {url} {why}; check spec.components.memory and that its "
        "Service answers the OE",
    )


def credentials(reg: AgentRegistration) -> tuple[str, ...]:
    """What the OE presents to the Agent's Memory server, in order: its knowledge statement (current key,
    then the previous one in grace), then the Agent's runtime tokens (current, then one in grace)."""
    return (*reg.statements("memory", purpose="knowledge"), *reg.tokens())


def _error(response: httpx.Response) -> str:
    try:
        code = response.json().get("error")
    except (ValueError, AttributeError):
        code = None
    return str(code)[:64] if code else f"HTTP {response.status_code}"


async def _forward(reg: AgentRegistration, method: str, **kwargs: Any) -> Response:
    """One call to the Agent's Memory server; its 2xx and 4xx answers pass through as they are."""
    if reg.memory_url is None:
        # The Agent's own state, not a failing peer: a 409, as a request its object's state refuses.
        return _refusal(
            409,
            "memory_server_unknown",
            f"Agent {reg.agent} has no Memory server this OE knows of (its registration names no memoryUrl); "
            "enable spec.components.memory on the Agent",
        )
    url = reg.memory_url + MEMORY_PATH
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            response = None
            for credential in credentials(reg):
                headers = {"authorization": f"Bearer {credential}", "content-type": "application/json"}
                response = await http.request(method, url, headers=headers, **kwargs)
                if response.status_code != 401:
                    break
    except httpx.HTTPError as exc:
        return _bad_gateway(reg.agent, reg.memory_url, f"is unreachable ({type(exc).__name__})")
    if response is None or response.status_code == 401:
        return _bad_gateway(
            reg.agent, reg.memory_url, "refused the OE's statement and the Agent's runtime token"
        )
    if response.status_code == 403:
        # The documents routes refuse nobody once a credential opened them: a 403 is the guard's, a
        # statement for another Agent or a Memory server of another Agent at this URL.
        return _bad_gateway(reg.agent, reg.memory_url, f"refused the OE's statement ({_error(response)})")
    if response.status_code >= 500:
        return _bad_gateway(reg.agent, reg.memory_url, f"answered HTTP {response.status_code}")
    try:
        body = response.json()
    except ValueError:
        return _bad_gateway(reg.agent, reg.memory_url, "answered with something that is not JSON")
    return JSONResponse(body, status_code=response.status_code)


def knowledge_routes(
    engine: _Engine,
    guard: Callable[[Handler], Handler],
    *,
    require: Callable[[Request, Attributes], Awaitable[None]],
) -> list[Route]:
    """The three routes; `require(request, attrs)` raises the 403 of a caller who may not do `attrs`."""

    async def registered(request: Request, permission: Any) -> AgentRegistration:
        namespace, name = request.path_params["project_id"], request.path_params["agent"]
        await require(request, on_agents(permission, namespace, name))
        agent = f"{namespace}/{name}"
        reg = engine.registry.get(agent)
        if reg is None:
            raise UnknownAgent(
                f"no Agent {agent!r} is registered with this Orchestration Engine; check the namespace and "
                "the name, and that the Agent is Ready"
            )
        return reg

    async def add(request: Request) -> Response:
        reg = await registered(request, KNOWLEDGE_WRITE)
        raw = b""
        async for piece in request.stream():
            raw += piece
            if len(raw) > MAX_INGEST_BODY_BYTES:
                return JSONResponse(
                    {"detail": [{"field": "text", "problem": "the body is over 2 MiB: split the document"}]},
                    status_code=413,
                )
        try:
            IngestBody.model_validate_json(raw or b"null")
        except ValidationError as exc:
            return JSONResponse({"detail": _problems(exc)}, status_code=400)
        return await _forward(reg, "POST", content=raw)

    async def sources(request: Request) -> Response:
        reg = await registered(request, KNOWLEDGE_READ)
        params = {
            key: request.query_params[key] for key in ("limit", "offset") if key in request.query_params
        }
        return await _forward(reg, "GET", params=params)

    async def forget(request: Request) -> Response:
        reg = await registered(request, KNOWLEDGE_WRITE)
        source = request.query_params.get("source", "")
        if not source:
            return JSONResponse(
                {"detail": [{"field": "source", "problem": "required: ?source=<the document's source>"}]},
                status_code=400,
            )
        return await _forward(reg, "DELETE", params={"source": source})

    return [
        Route(OE_KNOWLEDGE_PATH, guard(add), methods=["POST"]),
        Route(OE_KNOWLEDGE_PATH, guard(sources), methods=["GET"]),
        Route(OE_KNOWLEDGE_PATH, guard(forget), methods=["DELETE"]),
    ]
