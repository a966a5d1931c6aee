"""The OE's client API over httpx: one method per route, errors that say what happened and the fix."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx

from agent_runtime.cli.errors import DENIED, ERROR, NOT_FOUND, CliError
from agent_runtime.cli.kubeconfig import TOKEN_FIX

TIMEOUT_S = 30.0


def _message(response: httpx.Response) -> str:
    """The OE's own words: a Status message, a `detail` list of {field, problem}, or the body's start."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    if isinstance(body, dict):
        detail = body.get("detail")
        if isinstance(detail, list):
            return "; ".join(
                f"{item.get('field')}: {item.get('problem')}" if isinstance(item, dict) else str(item)
                for item in detail
            )
        if isinstance(detail, str):
            return detail
        for key in ("message", "error"):
            if isinstance(body.get(key), str):
                return str(body[key])
    return json.dumps(body)[:300]


def error_for(response: httpx.Response, *, what: str) -> CliError:
    """The CliError of a refused request, with the exit code of its class."""
    status = response.status_code
    text = _message(response)
    if status == 401:
        return CliError(f"the OE refused the credentials (401 {text}); {TOKEN_FIX}", exit_code=DENIED)
    if status == 403:
        hint = ""
        with contextlib.suppress(ValueError, AttributeError):
            hint = response.json().get("details", {}).get("grantedBy", {}).get("hint", "")
        return CliError(f"forbidden: {text}" + (f"; fix: {hint}" if hint else ""), exit_code=DENIED)
    if status == 404:
        return CliError(f"{what} not found ({text})", exit_code=NOT_FOUND)
    return CliError(f"{what}: the OE answered {status}: {text}", exit_code=ERROR)


class OEClient:
    """A typed client of the OE's client API."""

    def __init__(
        self,
        *,
        server: str,
        token: str,
        timeout: float = TIMEOUT_S,
        on_close: Callable[[], object] | None = None,
    ) -> None:
        self.server = server
        self._on_close = on_close  # e.g. the port-forward this client reaches the OE through
        self._http = httpx.Client(
            base_url=server, headers={"authorization": f"Bearer {token}"}, timeout=timeout
        )

    def __enter__(self) -> OEClient:
        return self

    def __exit__(self, *_: object) -> None:
        self._http.close()
        if self._on_close is not None:
            self._on_close()

    def _send(self, method: str, path: str, *, what: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        if response.status_code >= 400:
            raise error_for(response, what=what)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            # Something else listens there (a wrong port, a proxy's page): say so rather than fail on it.
            raise CliError(
                f"{self.server} answered {method} {path} with something that is not the OE's JSON; "
                "check --server or AGENTENGINE_SERVER"
            )
        return body

    def _unreachable(self, exc: Exception) -> CliError:
        return CliError(
            f"cannot reach the OE at {self.server} ({exc.__class__.__name__}); is it running? "
            "check --server or AGENTENGINE_SERVER"
        )

    def invoke(
        self, *, agent: str, input: Any, session_id: str | None = None, stream: bool = False
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"agent": agent, "input": input}
        if session_id:
            body["session_id"] = session_id
        if stream:
            body["stream"] = True  # the model's text as `llm_delta` events, for a follower
        return dict(self._send("POST", "/invoke", json=body, what=f"agent {agent}"))

    def execution(self, execution_id: str) -> dict[str, Any]:
        return dict(self._send("GET", f"/execution/{execution_id}", what=f"execution {execution_id}"))

    def executions(
        self,
        *,
        project: str | None,
        status: str | None = None,
        agent: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit}
        for key, value in (("project", project), ("status", status), ("agent", agent), ("cursor", cursor)):
            if value:
                params[key] = value
        return dict(self._send("GET", "/executions", params=params, what="executions"))

    def audit(self, execution_id: str) -> list[dict[str, Any]]:
        body = self._send("GET", f"/execution/{execution_id}/audit", what=f"execution {execution_id}")
        return list(body.get("records", []))

    def execution_logs(self, execution_id: str) -> dict[str, Any]:
        """The execution's durable log: `{"records": [...], "enabled": bool}`."""
        return dict(self._send("GET", f"/execution/{execution_id}/logs", what=f"execution {execution_id}"))

    def audit_verify(self, execution_id: str) -> dict[str, Any]:
        path = f"/execution/{execution_id}/audit/verify"
        return dict(self._send("GET", path, what=f"execution {execution_id}"))

    def reviews(self, *, project: str, limit: int = 50) -> dict[str, Any]:
        path = f"/api/v1/projects/{project}/reviews"
        return dict(self._send("GET", path, params={"limit": limit}, what=f"reviews of {project}"))

    def resume(
        self,
        execution_id: str,
        *,
        decision: str,
        notes: str | None = None,
        args: dict[str, Any] | None = None,
        value: Any = None,
    ) -> dict[str, Any]:
        review: dict[str, Any] = {"decision": decision}
        if notes is not None:
            review["reviewer_notes"] = notes
        if args is not None:
            review["args"] = args
        if value is not None:
            review["value"] = value  # a LangGraph interrupt()'s answer (hold kind `interrupt` only)
        return dict(
            self._send(
                "POST",
                f"/resume/{execution_id}",
                json={"human_review": review},
                what=f"execution {execution_id}",
            )
        )

    def cancel(self, execution_id: str) -> dict[str, Any]:
        path = f"/execution/{execution_id}/cancel"
        return dict(self._send("POST", path, what=f"execution {execution_id}"))

    def interrupt(self, execution_id: str, *, step: int) -> dict[str, Any]:
        path = f"/execution/{execution_id}/interrupt"
        return dict(self._send("POST", path, json={"step": step}, what=f"execution {execution_id}"))

    def fork_session(
        self, *, agent: str, session_id: str, execution_id: str, step: int, to_session: str | None
    ) -> dict[str, Any]:
        """Session fork (LG-18): the new execution, started in the new session."""
        namespace, name = agent.split("/", 1)
        path = f"/api/v1/projects/{namespace}/agents/{name}/sessions/{quote(session_id, safe='')}/fork"
        body: dict[str, Any] = {"execution_id": execution_id, "step": step}
        if to_session:
            body["session_id"] = to_session
        return dict(self._send("POST", path, json=body, what=f"session {session_id} of agent {agent}"))

    def connector_types(self) -> dict[str, Any]:
        return dict(self._send("GET", "/connector-types", what="connector types"))

    def test_connector(self, *, agent: str, connector: str) -> dict[str, Any]:
        namespace, name = agent.split("/", 1)
        path = f"/api/v1/projects/{namespace}/agents/{name}/connectors/{connector}/test"
        return dict(self._send("POST", path, what=f"connector {connector} of agent {agent}"))

    def knowledge_documents(self, method: str, *, agent: str, **kwargs: Any) -> dict[str, Any]:
        """An Agent's knowledge documents (POST adds one, GET lists, DELETE forgets `params.source`)."""
        namespace, name = agent.split("/", 1)
        path = f"/api/v1/projects/{namespace}/agents/{name}/knowledge/documents"
        # An ingest embeds the whole document before it is answered.
        return dict(self._send(method, path, what=f"knowledge of agent {agent}", timeout=300, **kwargs))

    def events(
        self, execution_id: str, *, after: int = 0, idle_timeout: float | None = None
    ) -> Iterator[dict[str, Any]]:
        """The execution's events (SSE `data:` lines) from after `after`; with `idle_timeout`, stops when
        none arrives for that long (the events so far), else follows until the stream ends."""
        timeout = httpx.Timeout(TIMEOUT_S, read=idle_timeout)
        params = {"after": after} if after else {}
        try:
            with self._http.stream(
                "GET", f"/execution/{execution_id}/events", params=params, timeout=timeout
            ) as stream:
                if stream.status_code >= 400:
                    stream.read()
                    raise error_for(stream, what=f"execution {execution_id}")
                for line in stream.iter_lines():
                    if line.startswith("data: "):
                        yield json.loads(line.removeprefix("data: "))
        except httpx.ReadTimeout:
            if idle_timeout is None:
                raise self._unreachable(httpx.ReadTimeout("read")) from None
            return
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
