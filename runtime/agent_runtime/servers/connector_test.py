"""A connector's `test_connection`, run where its credential lives (issue 29: `agentengine connectors test`).

- Tool Pod: `POST /connectors/{name}/test` (behind the pod's guard: only the OE's statement opens it) runs
  the connector's test with the pod's credentials and answers `{ok, detail, discovered_tools}`, its detail
  redacted of every secret the pod holds; 404 `connector_not_found` for a name it does not have.
- OE: `POST /api/v1/projects/{project}/agents/{agent}/connectors/{name}/test` (the client API), allowed to
  whoever may invoke the Agent (the test reaches the provider with the Agent's credential), asks the Agent's
  Tool Pod and answers `{agent, connector, ok, detail, discovered_tools}`; 404 for an unknown Agent or
  connector, 502 when the Tool Pod cannot be asked. The operator asks it too, as its own ServiceAccount, for
  a Connector's `Connected` condition (agent_operator/connection.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_runtime.oe.engine import Orchestrator, UnknownAgent
from agent_runtime.oe.runtimes import RuntimeUnavailable
from agent_runtime.protocol import CONNECTOR_TEST_PATH
from agent_runtime.servers.tool_calls import ToolCallService

Handler = Callable[[Request], Awaitable[Response]]
OE_CONNECTOR_TEST_PATH = "/api/v1/projects/{project_id}/agents/{agent}/connectors/{connector}/test"


class ConnectorTestAnswer(BaseModel):
    """What the OE answers a connector test: never a credential (the Tool Pod redacts the detail)."""

    agent: str = Field(description="NAMESPACE/NAME of the Agent")
    connector: str
    ok: bool = Field(description="whether the provider was reached with the configured credential")
    detail: str = ""
    discovered_tools: list[str] | None = None


def tool_pod_route(service: ToolCallService) -> Route:
    """The Tool Pod's side: the connector's own test with the pod's credentials."""

    async def test(request: Request) -> Response:
        name = request.path_params["name"]
        found = await service.test_connector(name)
        if found is None:
            return JSONResponse(
                {"error": "connector_not_found", "detail": f"this Tool Pod has no connector {name!r}"},
                status_code=404,
            )
        return JSONResponse(found.model_dump(mode="json"))

    return Route(CONNECTOR_TEST_PATH, test, methods=["POST"])


def oe_route(
    engine: Orchestrator,
    guard: Callable[[Handler], Handler],
    *,
    may_invoke: Callable[[Request, str, str], Awaitable[None]],
) -> Route:
    """The OE's side; `may_invoke(request, namespace, name)` raises the 403 of a caller who may not invoke."""

    async def test(request: Request) -> Response:
        namespace, name = request.path_params["project_id"], request.path_params["agent"]
        connector = request.path_params["connector"]
        await may_invoke(request, namespace, name)
        agent = f"{namespace}/{name}"
        reg = engine.registry.get(agent)
        if reg is None:
            raise UnknownAgent(
                f"no Agent {agent!r} is registered with this Orchestration Engine; check the namespace and "
                "the name, and that the Agent is Ready"
            )
        try:
            status, body = await engine.runtimes.test_connector(reg, connector)
        except RuntimeUnavailable as exc:
            return JSONResponse({"error": "tool_pod_unreachable", "detail": str(exc)}, status_code=502)
        if status == 404:
            return JSONResponse(
                {
                    "error": "connector_not_found",
                    "detail": f"Agent {agent} has no connector {connector!r}; see its agent.yaml connectors",
                },
                status_code=404,
            )
        if status != 200:
            detail = f"the Tool Pod of {agent} answered HTTP {status} to the connector test"
            return JSONResponse({"error": "tool_pod_refused", "detail": detail}, status_code=502)
        answer = ConnectorTestAnswer(
            agent=agent,
            connector=connector,
            ok=bool(body.get("ok")),
            detail=str(body.get("detail") or ""),
            discovered_tools=body.get("discovered_tools"),
        )
        return JSONResponse(answer.model_dump(mode="json"))

    return Route(OE_CONNECTOR_TEST_PATH, guard(test), methods=["POST"])
