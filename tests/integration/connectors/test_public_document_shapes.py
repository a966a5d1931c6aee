"""Issue 13 against real loopback servers, on both paths: documents shaped like large public APIs (an
issue tracker's optional auth, the Kubernetes API's wildcard and patch bodies and apiKey bearer token),
a provider behind a private CA, and no credential in any log record or in the frames of a raised error.
"""

from __future__ import annotations

import base64
import logging
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.connectors import (
    ToolArgumentError,
    ToolDefinitions,
    ToolYaml,
    compile_catalog,
    materialize_connector,
)
from agent_runtime.connectors.transport import CLIENT_LOGGERS
from tests.cluster import pki
from tests.conftest import free_port
from tests.integration.connectors.provider_connector import PROVIDER_DOCUMENT
from tests.providers.echo_provider import RunningProvider, running_echo_provider
from tests.unit.connectors.test_public_document_shapes import kubernetes_document, tracker_document

SECRET = "sk_live_sEcReT0987654321"


@pytest.fixture(scope="module")
def provider() -> Iterator[RunningProvider]:
    with running_echo_provider() as running:
        yield running


def _connector(document: dict[str, Any], base_url: str, **tool: Any) -> ToolDefinitions:
    catalog = compile_catalog(document, connector_name="api")
    return materialize_connector(
        ToolYaml(name="api", source={"base_url": base_url}, expose={"allow": ["*"]}, **tool), catalog
    )


# -- 1: optional-auth operations (`security: [..., {}]`) carry the bound credential -----------------


def test_the_bound_credential_reaches_optional_auth_operations(
    provider: RunningProvider, make: Callable[..., Any]
) -> None:
    connector = _connector(
        tracker_document(), f"{provider.url}/echo", auth={"type": "basic", "env": "TRACKER_AUTH"}
    )
    executor = make(connector)
    env = {"TRACKER_AUTH": "me@example.invalid:api-token"}
    basic = "Basic " + base64.b64encode(b"me@example.invalid:api-token").decode()
    issue = executor.execute("api_getIssue", {"issueIdOrKey": "PRJ-1"}, env=env).body
    assert issue["path"] == "/echo/issue/PRJ-1" and issue["headers"]["authorization"] == basic
    created = executor.execute("api_createIssue", {"fields": {"summary": "s"}}, env=env).body
    assert created["headers"]["authorization"] == basic and created["json"] == {"fields": {"summary": "s"}}
    # An operation that is anonymous only (`security: [{}]`) goes without it.
    assert "authorization" not in executor.execute("api_getServerInfo", {}, env=env).body["headers"]


# -- 2 and 3: wildcard create bodies as JSON, PATCH with a declared patch type ----------------------


def test_kubernetes_shaped_create_and_patch_bodies_go_out_as_declared(
    provider: RunningProvider, make: Callable[..., Any]
) -> None:
    executor = make(
        _connector(
            kubernetes_document(), f"{provider.url}/echo", auth={"type": "api_key", "env": "K8S_TOKEN"}
        )
    )
    env = {"K8S_TOKEN": SECRET}
    created = executor.execute(
        "api_createCoreV1NamespacedConfigMap",
        {"namespace": "team-a", "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}},
        env=env,
    ).body
    assert (created["method"], created["path"]) == ("POST", "/echo/api/v1/namespaces/team-a/configmaps")
    assert created["headers"]["content-type"] == "application/json"
    assert created["json"] == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}
    # The document's BearerToken is an apiKey on Authorization that says "Bearer": the prefix is sent.
    assert created["headers"]["authorization"] == f"Bearer {SECRET}"
    patched = executor.execute(
        "api_patchCoreV1NamespacedConfigMap",
        {"namespace": "team-a", "name": "cm", "body": {"data": {"k": "v"}}},
        env=env,
    ).body
    assert patched["method"] == "PATCH"
    assert patched["headers"]["content-type"] == "application/merge-patch+json"
    assert patched["json"] == {"data": {"k": "v"}}


# -- 4: a provider behind a private CA ---------------------------------------------------------------


class _Pki:
    def __init__(self, directory: Path) -> None:
        self.ca = pki.make_ca("connector-test-private-ca")
        self.other_ca = pki.make_ca("connector-test-other-ca")
        leaf = pki.issue(self.ca, common_name="provider", hosts=("127.0.0.1",), server=True)
        self.cert_file, self.key_file = pki.write_pair(leaf, directory, "provider")
        self.ca_file = directory / "ca.pem"
        self.ca_file.write_bytes(self.ca.cert_pem)
        self.other_ca_file = directory / "other-ca.pem"
        self.other_ca_file.write_bytes(self.other_ca.cert_pem)


@pytest.fixture(scope="module")
def private_pki(tmp_path_factory: pytest.TempPathFactory) -> _Pki:
    return _Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_provider(private_pki: _Pki) -> Iterator[RunningProvider]:
    with running_echo_provider(tls=(str(private_pki.cert_file), str(private_pki.key_file))) as running:
        yield running


def _tls_connector(provider: RunningProvider, tls: dict[str, str] | None) -> ToolDefinitions:
    catalog = compile_catalog(PROVIDER_DOCUMENT, connector_name="echo")
    tool = ToolYaml(name="echo", source={"base_url": provider.url}, expose={"allow": ["*"]}, tls=tls)
    return materialize_connector(tool, catalog)


def test_a_private_ca_named_in_tool_yaml_is_trusted_on_both_paths(
    tls_provider: RunningProvider, private_pki: _Pki, make: Callable[..., Any]
) -> None:
    by_file = make(_tls_connector(tls_provider, {"ca_file": str(private_pki.ca_file)}))
    assert by_file.execute("echo_getItem", {"itemId": "a"}).body["path"] == "/echo/items/a"
    by_env = make(
        _tls_connector(tls_provider, {"ca_env": "PROVIDER_CA"}),
        env={"PROVIDER_CA": private_pki.ca.cert_pem.decode()},
    )
    assert by_env.execute("echo_getItem", {"itemId": "b"}).status_code == 200


def test_the_process_environment_never_decides_what_is_trusted(
    tls_provider: RunningProvider,
    private_pki: _Pki,
    make: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # aiohttp's default context reads SSL_CERT_FILE: the async path trusted this CA by accident before.
    monkeypatch.setenv("SSL_CERT_FILE", str(private_pki.ca_file))
    monkeypatch.setenv("SSL_CERT_DIR", str(private_pki.ca_file.parent))
    for tls in (None, {"ca_file": str(private_pki.other_ca_file)}):
        executor = make(_tls_connector(tls_provider, tls))
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED") as failure:
            executor.execute("echo_getItem", {"itemId": "a"})
        assert "name that CA in tool.yaml (tls.ca_file or tls.ca_env)" in str(failure.value)
        assert str(failure.value.request.url).endswith("/echo/items/%7BitemId%7D")


# -- 5: no credential in any log record, at any level, from any library ------------------------------


class _Capture(logging.Handler):
    """Every record, formatted with its exception and stack, as an error reporter or a file would."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        self.names: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        self.names.add(record.name)
        self.lines.append(logging.Formatter("%(name)s %(levelname)s %(message)s").format(record))


@pytest.fixture
def every_log_record() -> Iterator[_Capture]:
    root = logging.getLogger()
    capture = _Capture()
    levels = {name: logging.getLogger(name).level for name in ("", *CLIENT_LOGGERS, "asyncio")}
    for name in levels:
        logging.getLogger(name).setLevel(logging.DEBUG)
    root.addHandler(capture)
    try:
        yield capture
    finally:
        root.removeHandler(capture)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def test_no_log_record_carries_the_credential(
    provider: RunningProvider, make: Callable[..., Any], every_log_record: _Capture
) -> None:
    connector = _connector(
        PROVIDER_DOCUMENT,
        provider.url,
        auth={"type": "api_key", "env": "ECHO_KEY", "in": "query", "name": "key"},
    )
    executor = make(connector)
    env = {"ECHO_KEY": SECRET}
    assert executor.execute("api_getItem", {"itemId": "a"}, env=env).body["query_pairs"] == [["key", SECRET]]
    # A same-origin redirect whose Location repeats the query (httpcore logs response headers at DEBUG).
    executor.execute("api_redirectGet", {"to": f"/echo/there?key={SECRET}", "status": "302"}, env=env)
    with pytest.raises(httpx.HTTPStatusError):
        executor.execute("api_leak", {"code": 401}, env=env)
    with pytest.raises(httpx.HTTPStatusError):
        executor.execute("api_status", {"code": 500}, env=env)
    leaked = [line for line in every_log_record.lines if SECRET in line]
    assert leaked == []
    # The capture works, and other code's client logging is left alone: a plain httpx call still logs.
    httpx.get(f"{provider.url}/echo/outside?key=visible")
    assert any("httpx" in line and "key=visible" in line for line in every_log_record.lines)


# -- 6: no credential, and no unredacted body, in the frames of a raised error ----------------------


def _raised(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("the call did not fail")


def _reported(exc: BaseException) -> str:
    """What an error reporter capturing locals ships of the connector's frames, through the whole chain.

    The caller's own frames (this test's, holding `env`) are the caller's business.
    """
    report = traceback.TracebackException.from_exception(exc, capture_locals=True)
    lines = []
    for part in (report, *_chained(report)):
        for frame in part.stack:
            if "agent_runtime/connectors" in frame.filename:
                lines.append(f"{frame.filename}:{frame.lineno} {frame.name} {frame.locals}")
    return "\n".join(lines)


def _chained(report: traceback.TracebackException) -> Iterator[traceback.TracebackException]:
    while (report := report.__cause__ or report.__context__) is not None:  # type: ignore[assignment]
        yield report


def test_raised_errors_hold_no_credential_in_their_frames(
    provider: RunningProvider, make: Callable[..., Any]
) -> None:
    bearer = make(_connector(PROVIDER_DOCUMENT, provider.url, auth={"type": "bearer", "env": "ECHO_TOKEN"}))
    query = make(
        _connector(
            PROVIDER_DOCUMENT,
            f"http://127.0.0.1:{free_port()}",
            auth={"type": "api_key", "env": "ECHO_KEY", "in": "query", "name": "key"},
        )
    )
    env = {"ECHO_TOKEN": SECRET, "ECHO_KEY": SECRET}
    failures = [
        # The provider quotes the credential back in its error body (kept only redacted).
        _raised(lambda: bearer.execute("api_leak", {"code": 403}, env=env)),
        # Nothing listens: a transport error after the URL with the key was built.
        _raised(lambda: query.execute("api_getItem", {"itemId": "a"}, env=env)),
        # An argument refused after the credential was read.
        _raised(lambda: bearer.execute("api_getItem", {"itemId": "a", "X-Trace": "a\nb"}, env=env)),
    ]
    assert [type(f) for f in failures] == [httpx.HTTPStatusError, httpx.ConnectError, ToolArgumentError]
    assert "[REDACTED]" in failures[0].response.text  # type: ignore[attr-defined]
    for failure in failures:
        report = _reported(failure)
        assert "agent_runtime/connectors/executor.py" in report  # the frames are there, and clean
        assert "prepared" not in report and SECRET not in report, report
        assert failure.__context__ is None and failure.__cause__ is None
