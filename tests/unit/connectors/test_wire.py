"""Arguments -> wire format, retry and redirect decisions, error classification (pure parts)."""

from __future__ import annotations

import base64
import email.utils
import time

import httpx
import pytest

from agent_runtime.connectors import (
    ConnectorError,
    CredentialMissingError,
    ToolArgumentError,
    ToolYaml,
    UnknownToolError,
    classify_tool_api_error,
    compile_catalog,
    materialize_connector,
)
from agent_runtime.connectors.executor import ConnectorExecutor
from agent_runtime.connectors.policy import (
    redirect_method,
    retry_after_seconds,
    retry_wait,
    same_origin_target,
)
from agent_runtime.connectors.wire import deep_object_pairs, encode_pairs, style_pairs
from tests.unit.connectors.sample_documents import jira_document


def _executor(auth: dict | None = None) -> ConnectorExecutor:
    catalog = compile_catalog(jira_document(), connector_name="jiradc")
    tool = ToolYaml(
        name="jiradc", source={"base_url": "https://j.invalid/api/"}, expose={"allow": ["*"]}, auth=auth
    )
    return ConnectorExecutor(materialize_connector(tool, catalog))


def test_deep_object_uses_indexed_brackets() -> None:
    pairs: list[tuple[str, str]] = []
    deep_object_pairs("items", [{"price": "p_1", "qty": 2}], pairs)
    deep_object_pairs("metadata", {"a": True, "b": None}, pairs)
    assert pairs == [
        ("items[0][price]", "p_1"),
        ("items[0][qty]", "2"),
        ("metadata[a]", "true"),
        ("metadata[b]", ""),
    ]
    assert encode_pairs([("expand[0]", "a b/c")]) == "expand%5B0%5D=a%20b%2Fc"


def test_form_style_arrays_explode_or_join() -> None:
    exploded: list[tuple[str, str]] = []
    style_pairs("ids", [1, 2], style="form", explode=True, out=exploded)
    joined: list[tuple[str, str]] = []
    style_pairs("ids", [1, 2], style="form", explode=False, out=joined)
    assert exploded == [("ids", "1"), ("ids", "2")] and joined == [("ids", "1,2")]


def test_prepare_builds_path_query_and_auth_without_sending() -> None:
    executor = _executor({"type": "bearer", "env": "TOKEN"})
    prepared = executor.prepare(
        "jiradc_getComments", {"issueIdOrKey": "A/1", "expand": "x", "unknown": 1}, env={"TOKEN": "t0k"}
    )
    assert prepared.url == "https://j.invalid/api/issue/A%2F1/comment?expand=x"
    assert prepared.headers["authorization"] == "Bearer t0k"
    assert prepared.safe_url == "https://j.invalid/api/issue/{issueIdOrKey}/comment"
    assert "t0k" in prepared.secrets


def test_basic_auth_uses_the_value_as_user_when_it_has_no_colon() -> None:
    executor = _executor({"type": "basic", "env": "KEY"})
    prepared = executor.prepare(
        "jiradc_getComments", {"issueIdOrKey": "1", "expand": "x"}, env={"KEY": "sk_1"}
    )
    assert prepared.headers["authorization"] == "Basic " + base64.b64encode(b"sk_1:").decode()


def test_missing_required_argument_unknown_tool_and_missing_credential_fail_early() -> None:
    executor = _executor({"type": "bearer", "env": "TOKEN"})
    with pytest.raises(ToolArgumentError, match="expand"):
        executor.prepare("jiradc_getComments", {"issueIdOrKey": "1"}, env={"TOKEN": "t"})
    with pytest.raises(UnknownToolError, match="nope"):
        executor.prepare("nope", {}, env={})
    with pytest.raises(CredentialMissingError, match="TOKEN is not set"):
        executor.prepare("jiradc_getComments", {"issueIdOrKey": "1", "expand": "x"}, env={})
    # an operation with `security: []` needs no credential
    assert executor.prepare("jiradc_postShape", {"body": "round"}, env={}).content == b'"round"'


def test_executor_needs_a_base_url() -> None:
    catalog = compile_catalog({"openapi": "3.0.0", "paths": {}}, connector_name="x")
    with pytest.raises(ConnectorError, match="base_url"):
        ConnectorExecutor(catalog)


def test_retry_after_seconds_and_dates_are_capped() -> None:
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds("120") == 30.0
    soon = email.utils.formatdate(time.time() + 5, usegmt=True)
    assert 3.0 < (retry_after_seconds(soon) or 0) <= 5.0
    assert retry_after_seconds("soon") is None


def test_only_safe_methods_retry_on_429_and_503_three_times() -> None:
    assert retry_wait(method="GET", status=429, retry_after="1", attempt=0) == 1.0
    assert retry_wait(method="HEAD", status=503, retry_after=None, attempt=2) is not None
    assert retry_wait(method="GET", status=503, retry_after=None, attempt=3) is None
    assert retry_wait(method="POST", status=429, retry_after="1", attempt=0) is None
    assert retry_wait(method="GET", status=500, retry_after="1", attempt=0) is None


def test_redirect_origin_and_method() -> None:
    assert same_origin_target("http://127.0.0.1:8080/a", "/b?x=1") == "http://127.0.0.1:8080/b?x=1"
    assert same_origin_target("http://127.0.0.1/a", "http://127.0.0.1:80/b c") == "http://127.0.0.1/b%20c"
    assert same_origin_target("http://127.0.0.1:8/a", "http://localhost:8/b") is None
    assert same_origin_target("http://h/a", "https://h/a") is None
    assert redirect_method("POST", 303) == "GET" and redirect_method("POST", 307) == "POST"


def _status_error(status: int, body: bytes) -> httpx.HTTPStatusError:
    request = httpx.Request("GET", "https://p.invalid/x")
    response = httpx.Response(status, content=body, request=request)
    return httpx.HTTPStatusError("x", request=request, response=response)


@pytest.mark.parametrize(
    ("status", "category"),
    [
        (401, "auth"),
        (403, "forbidden"),
        (404, "not_found"),
        (429, "rate_limited"),
        (400, "client_error"),
        (502, "server_error"),
    ],
)
def test_status_categories(status: int, category: str) -> None:
    assert classify_tool_api_error(_status_error(status, b"")).category == category


def test_explanations_are_sanitized() -> None:
    body = (
        b'{"error": {"message": "bad key sk_live_42 see https://evil.invalid/x?k=sk_live_42 '
        b'\\u001b[31mred\\u0000"}}'
    )
    result = classify_tool_api_error(_status_error(401, body), secrets=["sk_live_42"])
    assert "sk_live_42" not in result.explanation
    assert "evil.invalid" not in result.explanation and "\x1b" not in result.explanation
    assert result.explanation.startswith("HTTP 401") and "[redacted]" in result.explanation.lower()
    long = classify_tool_api_error(_status_error(500, b"x" * 10_000))
    assert len(long.explanation) <= 300


def test_transport_failures_are_classified() -> None:
    request = httpx.Request("GET", "https://p.invalid/")
    assert classify_tool_api_error(httpx.ReadTimeout("t", request=request)).category == "timeout"
    assert classify_tool_api_error(httpx.ConnectError("c", request=request)).category == "connection"


def test_cookie_parameters_and_cookie_api_keys_share_one_header() -> None:
    document = {
        "openapi": "3.0.0",
        "paths": {
            "/a": {
                "get": {
                    "operationId": "a",
                    "parameters": [{"name": "session", "in": "cookie", "schema": {"type": "string"}}],
                }
            }
        },
    }
    catalog = compile_catalog(document, connector_name="c")
    tool = ToolYaml(
        name="c",
        source={"base_url": "http://127.0.0.1:9"},
        expose={"allow": ["a"]},
        auth={"type": "api_key", "env": "K", "in": "cookie", "name": "token"},
    )
    executor = ConnectorExecutor(materialize_connector(tool, catalog))
    prepared = executor.prepare("c_a", {"session": "s 1"}, env={"K": "v"})
    assert prepared.headers["cookie"] == "session=s%201; token=v"
