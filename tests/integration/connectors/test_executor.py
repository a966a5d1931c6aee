"""ConnectorExecutor against the real loopback echo provider (no mocks)."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agent_runtime.connectors import (
    ConnectorExecutor,
    ToolArgumentError,
    classify_tool_api_error,
)
from tests.conftest import free_port
from tests.integration.connectors.provider_connector import provider_connector
from tests.providers.echo_provider import RunningProvider, running_echo_provider

SECRET = "sk_live_abcdef123456"
ENV = {"ECHO_TOKEN": SECRET}


@pytest.fixture(scope="module")
def provider() -> Iterator[RunningProvider]:
    with running_echo_provider() as running:
        yield running


@pytest.fixture(scope="module")
def other_origin() -> Iterator[RunningProvider]:
    with running_echo_provider() as running:
        yield running


@pytest.fixture
def executor(provider: RunningProvider, make: Callable[..., Any]) -> Any:
    return make(provider_connector(provider.url))


_SERIAL = itertools.count()


def _unique(name: str) -> str:
    """A flaky-route key no other test (or other mode of this test) has used on the shared provider."""
    return f"{name}-{next(_SERIAL)}"


def _hits(provider: RunningProvider, key: str) -> int:
    return httpx.get(f"{provider.url}/hits/{key}").json()["hits"]


def test_path_query_header_and_credential_reach_the_provider(executor: Any) -> None:
    response = executor.execute(
        "echo_getItem",
        {"itemId": "a b/c", "filter": {"state": "open"}, "tags": ["x", "y"], "X-Trace": "t1", "ignored": 1},
        env=ENV,
    )
    echo = response.body
    assert response.status_code == 200 and response.truncated is False
    assert response.content_type == "application/json"
    assert echo["raw_path"] == "/echo/items/a%20b%2Fc"
    assert echo["query_pairs"] == [["filter[state]", "open"], ["tags", "x"], ["tags", "y"]]
    assert echo["headers"]["x-trace"] == "t1"
    assert echo["headers"]["authorization"] == f"Bearer {SECRET}"


def test_dot_segments_in_path_arguments_cannot_reach_other_operations(executor: Any) -> None:
    echo = executor.execute("echo_getItem", {"itemId": ".."}, env=ENV).body
    assert echo["raw_path"] == "/echo/items/%2E%2E"
    with pytest.raises(ToolArgumentError, match="empty"):
        executor.execute("echo_getItem", {"itemId": ""}, env=ENV)


def test_json_bodies_mapped_and_wrapped(executor: Any) -> None:
    created = executor.execute("echo_createItem", {"title": "t", "extra": {"k": [1, None]}}, env=ENV).body
    assert created["json"] == {"title": "t", "extra": {"k": [1, None]}}
    documents = [{"anything": {"nested": True}}, {"b": 2}]
    put = executor.execute("echo_putDocument", {"body": documents}, env=ENV).body
    assert put["method"] == "PUT" and put["json"] == documents


def test_missing_required_argument_sends_nothing(executor: Any, provider: RunningProvider) -> None:
    with pytest.raises(ToolArgumentError, match="key"):
        executor.execute("echo_flakyGet", {"fail": "0"}, env=ENV)
    with pytest.raises(ToolArgumentError, match="title"):
        executor.execute("echo_createItem", {}, env=ENV)


def test_same_origin_redirects_are_followed(executor: Any) -> None:
    response = executor.execute("echo_redirectGet", {"to": "/echo/landed?x=1", "status": "302"}, env=ENV)
    assert response.body["path"] == "/echo/landed"
    assert response.body["headers"]["authorization"] == f"Bearer {SECRET}"
    see_other = executor.execute("echo_redirectPost", {"to": "/echo/after", "status": "303"}, env=ENV)
    assert see_other.body["method"] == "GET"


def test_cross_origin_redirects_are_refused(executor: Any, other_origin: RunningProvider) -> None:
    key_cross = _unique("cross")
    target = f"{other_origin.url}/flaky/{key_cross}?fail=0"
    with pytest.raises(httpx.HTTPStatusError) as caught:
        executor.execute("echo_redirectGet", {"to": target, "status": "302"}, env=ENV)
    assert caught.value.response.status_code == 302
    assert "location" not in caught.value.response.headers
    assert "other" not in str(caught.value) and str(other_origin.port) not in str(caught.value)
    assert _hits(other_origin, key_cross) == 0
    assert classify_tool_api_error(caught.value).category == "client_error"


def test_redirect_loops_end(executor: Any) -> None:
    with pytest.raises(httpx.HTTPStatusError) as caught:
        executor.execute("echo_loop", {}, env=ENV)
    assert caught.value.response.status_code == 302


def test_a_path_credential_connector_rejects_every_redirect(
    provider: RunningProvider, make: Callable[..., Any]
) -> None:
    connector = provider_connector(provider.url, auth={"type": "path", "env": "ECHO_TOKEN", "name": "key"})
    executor = make(connector)
    with pytest.raises(httpx.HTTPStatusError) as caught:
        executor.execute("echo_redirectGet", {"to": "/echo/same-origin"}, env=ENV)
    assert caught.value.response.status_code == 302
    echoed = executor.execute("echo_flakyGet", {"fail": "0"}, env=ENV).body
    assert echoed["path"] == f"/flaky/{SECRET}"
    flaky = next(t for t in connector.tools if t.name == "echo_flakyGet")
    assert "key" not in flaky.input_schema["properties"]


def test_get_retries_429_and_503_honouring_retry_after(executor: Any, provider: RunningProvider) -> None:
    key_r429 = _unique("r429")
    key_r503 = _unique("r503")
    key_r_many = _unique("r_many")
    response = executor.execute(
        "echo_flakyGet", {"key": key_r429, "fail": "1", "status": "429", "retry_after": "1"}, env=ENV
    )
    assert response.status_code == 200 and _hits(provider, key_r429) == 2
    response = executor.execute(
        "echo_flakyGet", {"key": key_r503, "fail": "3", "status": "503", "retry_after": "0"}, env=ENV
    )
    assert response.body["hits"] == 4
    with pytest.raises(httpx.HTTPStatusError) as caught:
        executor.execute(
            "echo_flakyGet", {"key": key_r_many, "fail": "9", "status": "503", "retry_after": "0"}, env=ENV
        )
    assert caught.value.response.status_code == 503 and _hits(provider, key_r_many) == 4


def test_retry_after_as_an_http_date_is_honoured(executor: Any, provider: RunningProvider) -> None:
    key_date = _unique("date")
    when = email.utils.formatdate(time.time() + 1, usegmt=True)
    response = executor.execute(
        "echo_flakyGet", {"key": key_date, "fail": "1", "status": "503", "retry_after": when}, env=ENV
    )
    assert response.status_code == 200 and _hits(provider, key_date) == 2


def test_post_and_other_statuses_are_not_retried(executor: Any, provider: RunningProvider) -> None:
    key_post = _unique("post")
    key_s500 = _unique("s500")
    with pytest.raises(httpx.HTTPStatusError):
        executor.execute("echo_flakyPost", {"key": key_post, "fail": "1", "status": "503"}, env=ENV)
    assert _hits(provider, key_post) == 1
    with pytest.raises(httpx.HTTPStatusError):
        executor.execute("echo_flakyGet", {"key": key_s500, "fail": "1", "status": "500"}, env=ENV)
    assert _hits(provider, key_s500) == 1


def test_a_retry_wait_beyond_the_budget_fails_now(
    provider: RunningProvider, make: Callable[..., Any]
) -> None:
    key_long = _unique("long")
    executor = make(provider_connector(provider.url), budget_s=2)
    with pytest.raises(httpx.HTTPStatusError) as caught:
        executor.execute(
            "echo_flakyGet", {"key": key_long, "fail": "1", "status": "429", "retry_after": "25"}, env=ENV
        )
    assert caught.value.response.headers["retry-after"] == "25"
    assert classify_tool_api_error(caught.value).category == "rate_limited"
    assert _hits(provider, key_long) == 1


def test_responses_are_capped_and_marked_truncated(executor: Any) -> None:
    text = executor.execute("echo_big", {"size": "300000"}, env=ENV)
    assert text.truncated is True and len(text.body) == 200_000
    small = executor.execute("echo_big", {"size": "200000"}, env=ENV)
    assert small.truncated is False and len(small.body) == 200_000
    as_json = executor.execute("echo_big", {"size": "300000", "type": "json"}, env=ENV)
    assert as_json.truncated is True and isinstance(as_json.body, str)
    endless = executor.execute("echo_endless", {}, env=ENV)
    assert endless.truncated is True and len(endless.body) == 200_000


def test_text_bodies_follow_their_charset_and_survive_unknown_ones(executor: Any) -> None:
    latin = executor.execute(
        "echo_status",
        {"code": 200, "body": "café", "content_type": "text/plain; charset=iso-8859-1"},
        env=ENV,
    )
    assert latin.body == "café" and latin.content_type == "text/plain; charset=iso-8859-1"
    bogus = executor.execute(
        "echo_status", {"code": 200, "body": "ok", "content_type": "text/plain; charset=no-such"}, env=ENV
    )
    assert bogus.body == "ok"
    json_text = executor.execute(
        "echo_status",
        {"code": 200, "body": '{"a": [1]}', "content_type": "application/problem+json"},
        env=ENV,
    )
    assert json_text.body == {"a": [1]}


def test_one_budget_covers_slow_bodies_and_stalls(
    provider: RunningProvider, make: Callable[..., Any]
) -> None:
    executor = make(provider_connector(provider.url), budget_s=1.0)
    with pytest.raises(httpx.TimeoutException):
        executor.execute("echo_slow", {"delay": "0.3", "chunks": "10"}, env=ENV)
    with pytest.raises(httpx.TimeoutException) as caught:
        executor.execute("echo_stall", {"delay": "3"}, env=ENV)
    assert classify_tool_api_error(caught.value).category == "timeout"
    assert "authorization" not in caught.value.request.headers


def test_error_bodies_keep_4kb_without_the_credential(executor: Any) -> None:
    with pytest.raises(httpx.HTTPStatusError) as caught:
        executor.execute("echo_leak", {"code": 401}, env=ENV)
    error = caught.value
    assert error.response.status_code == 401
    assert SECRET not in error.response.text and "[REDACTED]" in error.response.text
    assert SECRET not in str(error) and SECRET not in repr(error.request.headers)
    assert "authorization" not in error.request.headers
    assert error.__context__ is None and error.__cause__ is None
    assert error.request.url.path == "/leak/{code}" and error.request.url.query == b""
    verdict = classify_tool_api_error(error, secrets=[SECRET])
    assert verdict.category == "auth" and SECRET not in verdict.explanation
    assert "provider.invalid" not in verdict.explanation
    with pytest.raises(httpx.HTTPStatusError) as big:
        executor.execute("echo_status", {"code": 500, "body": "e" * 10_000}, env=ENV)
    assert len(big.value.response.content) == 4096


def test_query_credentials_never_leave_in_errors(provider: RunningProvider, make: Callable[..., Any]) -> None:
    connector = provider_connector(
        provider.url, auth={"type": "api_key", "env": "ECHO_TOKEN", "in": "query", "name": "key"}
    )
    executor = make(connector)
    with pytest.raises(httpx.HTTPStatusError) as caught:
        executor.execute("echo_leak", {"code": 403}, env=ENV)
    assert SECRET not in caught.value.response.text
    assert caught.value.request.url.query == b""


def test_transport_failures_raise_httpx_errors_without_credentials(make: Callable[..., Any]) -> None:
    executor = make(provider_connector(f"http://127.0.0.1:{free_port()}"))
    with pytest.raises(httpx.ConnectError) as caught:
        executor.execute("echo_getItem", {"itemId": "1"}, env=ENV)
    assert caught.value.__context__ is None
    assert "authorization" not in caught.value.request.headers
    assert classify_tool_api_error(caught.value).category == "connection"


def test_undecodable_bodies_raise_a_decoding_error_without_credentials(executor: Any) -> None:
    with pytest.raises(httpx.DecodingError) as caught:
        executor.execute("echo_garbled", {}, env=ENV)
    assert caught.value.__context__ is None
    assert "authorization" not in caught.value.request.headers
    assert classify_tool_api_error(caught.value).category == "server_error"


def test_concurrent_calls_then_close_waits_and_refuses_new_calls(provider: RunningProvider) -> None:
    executor = ConnectorExecutor(provider_connector(provider.url))
    results: list[int] = []
    started = threading.Barrier(9)

    def call() -> None:
        started.wait()
        results.append(executor.execute("echo_slow", {"delay": "0.05", "chunks": "4"}, env=ENV).status_code)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    started.wait()
    deadline = time.monotonic() + 10
    while executor.in_flight < 8 and time.monotonic() < deadline:
        time.sleep(0.005)
    executor.close()
    for thread in threads:
        thread.join()
    assert results == [200] * 8
    with pytest.raises(RuntimeError, match="closed"):
        executor.execute("echo_endless", {}, env=ENV)


def test_async_execution_shares_the_request_building(provider: RunningProvider) -> None:
    async def scenario() -> list[object]:
        async with ConnectorExecutor(provider_connector(provider.url)) as executor:
            echoed, retried = await asyncio.gather(
                executor.aexecute("echo_getItem", {"itemId": "7", "tags": ["a"]}, env=ENV),
                executor.aexecute(
                    "echo_flakyGet", {"key": "async", "fail": "1", "retry_after": "0"}, env=ENV
                ),
            )
            try:
                await executor.aexecute("echo_leak", {"code": 404}, env=ENV)
            except httpx.HTTPStatusError as exc:
                failure: object = exc
            return [echoed, retried, failure]

    echoed, retried, failure = asyncio.run(scenario())
    assert echoed.body["raw_path"] == "/echo/items/7"  # type: ignore[attr-defined]
    assert retried.body["hits"] == 2  # type: ignore[attr-defined]
    assert isinstance(failure, httpx.HTTPStatusError) and SECRET not in failure.response.text


def test_one_executor_serves_successive_event_loops(provider: RunningProvider) -> None:
    executor = ConnectorExecutor(provider_connector(provider.url))

    async def once() -> int:
        return (await executor.aexecute("echo_getItem", {"itemId": "1"}, env=ENV)).status_code

    assert [asyncio.run(once()), asyncio.run(once())] == [200, 200]
    executor.close()


def test_many_concurrent_async_calls_each_get_their_own_answer(provider: RunningProvider) -> None:
    async def scenario() -> list[str]:
        async with ConnectorExecutor(provider_connector(provider.url)) as executor:
            responses = await asyncio.gather(
                *(executor.aexecute("echo_getItem", {"itemId": str(i)}, env=ENV) for i in range(200))
            )
            return [r.body["raw_path"] for r in responses]

    assert asyncio.run(scenario()) == [f"/echo/items/{i}" for i in range(200)]


def test_a_cancelled_async_call_leaves_the_executor_usable(provider: RunningProvider) -> None:
    async def scenario() -> tuple[int, int, int]:
        async with ConnectorExecutor(provider_connector(provider.url)) as executor:
            stalled = asyncio.ensure_future(executor.aexecute("echo_stall", {"delay": "5"}, env=ENV))
            await asyncio.sleep(0.3)  # let the request reach the stalling provider
            during = executor.in_flight
            stalled.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stalled
            after = executor.in_flight
            response = await executor.aexecute("echo_getItem", {"itemId": "1"}, env=ENV)
            return during, after, response.status_code

    assert asyncio.run(scenario()) == (1, 0, 200)
