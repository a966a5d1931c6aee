"""email against aiosmtpd and Dovecot; http and webhook against loopback HTTP servers."""

from __future__ import annotations

import email
import hashlib
import hmac
import imaplib
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from agent_runtime.connectors.builtin.registry import create_connector, materialize_builtin
from agent_runtime.connectors.builtin.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER
from agent_runtime.connectors.framework import BuiltinConnector, BuiltinToolError, ConnectorConfigError
from tests.conftest import free_port
from tests.integration.builtin.conftest import run
from tests.peers.servers import REJECTED_RECIPIENT, MailServer, SmtpServer
from tests.providers.saas_peer import running_app

MAIL_ENV = "MAILBOX_PASSWORD"
WEBHOOK_SECRET = "whsec-Canary-4411"
HTTP_TOKEN = "http-Canary-token-90ab"


def execute(conn: BuiltinConnector, tool: str, env: Mapping[str, str], **arguments: Any) -> Any:
    async def go() -> Any:
        try:
            return await conn.execute(tool, arguments, env=env)
        finally:
            await conn.aclose()

    return run(go())


def mail_connector(*, smtp: SmtpServer | None = None, imap: MailServer | None = None) -> BuiltinConnector:
    config: dict[str, Any] = {"username": "agent@example.test", "from_address": "agent@example.test"}
    if smtp is not None:
        config |= {"smtp_host": smtp.host, "smtp_port": smtp.port, "smtp_security": "none"}
    if imap is not None:
        config |= {"imap_host": imap.host, "imap_port": imap.port, "imap_security": "none"}
    defs = materialize_builtin(
        name="mailbox", type_name="email", config=config, credentials={"password": MAIL_ENV}
    )
    return create_connector(defs)


# email -----------------------------------------------------------------------------------------------------


def test_send_over_smtp_with_auth(smtp: SmtpServer) -> None:
    result = execute(
        mail_connector(smtp=smtp),
        "email.send",
        {MAIL_ENV: smtp.password},
        to=["ada@example.test"],
        cc=["bob@example.test"],
        subject="Weekly report",
        body="All green.",
    )
    assert result["accepted"] == ["ada@example.test", "bob@example.test"] and result["refused"] == []
    (message,) = smtp.messages
    assert message["to"] == ["ada@example.test", "bob@example.test"]
    parsed = email.message_from_bytes(message["data"])
    assert parsed["Subject"] == "Weekly report" and parsed.get_payload(decode=True).strip() == b"All green."


def test_smtp_failures_are_classified_and_credential_free(smtp: SmtpServer) -> None:
    with pytest.raises(BuiltinToolError) as wrong:
        execute(
            mail_connector(smtp=smtp),
            "email.send",
            {MAIL_ENV: "mail-wrong"},
            to=["a@b.test"],
            subject="s",
            body="b",
        )
    assert wrong.value.category == "auth" and "mail-wrong" not in wrong.value.explanation
    with pytest.raises(BuiltinToolError) as rejected:
        execute(
            mail_connector(smtp=smtp),
            "email.send",
            {MAIL_ENV: smtp.password},
            to=[REJECTED_RECIPIENT],
            subject="s",
            body="b",
        )
    assert rejected.value.category == "rejected" and "550" in rejected.value.explanation
    assert smtp.password not in rejected.value.explanation
    assert smtp.messages == []


def test_smtp_unreachable_is_connection() -> None:
    server = SmtpServer(host="127.0.0.1", port=free_port(), user="u", password="p")
    with pytest.raises(BuiltinToolError) as caught:
        execute(
            mail_connector(smtp=server), "email.send", {MAIL_ENV: "p"}, to=["a@b.test"], subject="s", body="b"
        )
    assert caught.value.category == "connection"


def test_subject_with_a_line_break_is_refused(smtp: SmtpServer) -> None:
    with pytest.raises(BuiltinToolError, match="one line"):
        execute(
            mail_connector(smtp=smtp),
            "email.send",
            {MAIL_ENV: smtp.password},
            to=["a@b.test"],
            subject="hi\r\nBcc: victim@example.test",
            body="b",
        )


def _deliver(imap: MailServer, *, subject: str, sender: str, body: str) -> None:
    client = imaplib.IMAP4(imap.host, imap.port)
    client.login(imap.user, imap.password)
    headers = f"From: {sender}\r\nTo: {imap.user}\r\nSubject: {subject}\r\nDate: {email.utils.formatdate()}"
    message = f"{headers}\r\n\r\n{body}\r\n"
    client.append("INBOX", "", imaplib.Time2Internaldate(time.time()), message.encode())
    client.logout()


@pytest.fixture(scope="module")
def filled_imap(imap: MailServer) -> MailServer:
    _deliver(imap, subject="Invoice 42", sender="billing@vendor.test", body="Please pay invoice 42.")
    _deliver(imap, subject="Lunch?", sender="bob@example.test", body="Noon at the usual place")
    _deliver(imap, subject="Invoice 43", sender="billing@vendor.test", body="Another one; sorry.")
    return imap


def test_search_over_imap(filled_imap: MailServer) -> None:
    env = {MAIL_ENV: filled_imap.password}
    found = execute(mail_connector(imap=filled_imap), "email.search", env, **{"from": "billing@vendor.test"})
    assert [m["subject"] for m in found["messages"]] == ["Invoice 43", "Invoice 42"]
    assert found["messages"][0]["snippet"].startswith("Another one") and found["total"] == 2
    limited = execute(mail_connector(imap=filled_imap), "email.search", env, limit=1)
    assert limited["total"] >= 3 and len(limited["messages"]) == 1 and limited["truncated"] is True
    quoted = execute(mail_connector(imap=filled_imap), "email.search", env, subject='Lunch?" OR ALL "')
    assert quoted["messages"] == []  # the quote stays inside the search string


def test_draft_is_saved_in_the_drafts_mailbox(filled_imap: MailServer) -> None:
    env = {MAIL_ENV: filled_imap.password}
    saved = execute(
        mail_connector(imap=filled_imap),
        "email.draft",
        env,
        to=["ada@example.test"],
        subject="Draft reply",
        body="Hi Ada",
    )
    assert saved["saved"] is True
    client = imaplib.IMAP4(filled_imap.host, filled_imap.port)
    client.login(filled_imap.user, filled_imap.password)
    client.select("Drafts", readonly=True)
    _, data = client.search(None, "DRAFT", 'SUBJECT "Draft reply"')
    assert len(data[0].split()) == 1
    client.logout()


def test_imap_wrong_password_and_unknown_mailbox(filled_imap: MailServer) -> None:
    with pytest.raises(BuiltinToolError) as wrong:
        execute(mail_connector(imap=filled_imap), "email.search", {MAIL_ENV: "mail-wrong"})
    assert wrong.value.category == "auth" and "mail-wrong" not in wrong.value.explanation
    with pytest.raises(BuiltinToolError) as missing:
        execute(
            mail_connector(imap=filled_imap), "email.search", {MAIL_ENV: filled_imap.password}, mailbox="Nope"
        )
    assert missing.value.category == "not_found"


def test_tools_follow_what_is_configured(smtp: SmtpServer, imap: MailServer) -> None:
    assert [t.name for t in mail_connector(smtp=smtp).list_tools()] == ["email.send"]
    assert [t.name for t in mail_connector(imap=imap).list_tools()] == ["email.draft", "email.search"]


# webhook and http ------------------------------------------------------------------------------------------


class Receiver:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            body = await request.body()
            self.received.append({"headers": dict(request.headers), "body": body})
            if request.query_params.get("fail"):
                return JSONResponse({"error": "receiver is down"}, status_code=503)
            return PlainTextResponse("thanks")

        async def api(request: Request) -> Response:
            body = await request.body()
            self.received.append(
                {
                    "headers": dict(request.headers),
                    "body": body,
                    "path": request.url.path,
                    "query": dict(request.query_params),
                    "method": request.method,
                }
            )
            if request.headers.get("authorization") != f"Bearer {HTTP_TOKEN}" and request.url.path.startswith(
                "/api"
            ):
                return JSONResponse(
                    {"message": f"bad token {request.headers.get('authorization')}"}, status_code=401
                )
            if request.url.path.endswith("/hop"):
                return RedirectResponse("/api/v1/landed", status_code=307)
            if request.url.path.endswith("/moved"):
                return RedirectResponse("https://elsewhere.example/api/x", status_code=302)
            return JSONResponse(
                {"method": request.method, "path": request.url.path, "json": json.loads(body or b"null")}
            )

        async def page(request: Request) -> Response:
            self.received.append({"headers": dict(request.headers), "path": request.url.path})
            return PlainTextResponse("public page")

        return Starlette(
            routes=[
                Route("/hook", hook, methods=["POST"]),
                Route("/api/{rest:path}", api, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
                Route("/public/{rest:path}", page, methods=["GET"]),
            ]
        )


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[Receiver, str]]:
    receiver = Receiver()
    with running_app(receiver.app()) as url:
        yield receiver, url


def webhook(url: str, *, signed: bool) -> BuiltinConnector:
    credentials = {"signing_secret": "WEBHOOK_SECRET"} if signed else {}
    defs = materialize_builtin(
        name="events", type_name="webhook", config={"url": url}, credentials=credentials
    )
    return create_connector(defs)


def test_webhook_signature_verifies(receiver: tuple[Receiver, str]) -> None:
    rx, url = receiver
    payload = {"event": "order.paid", "id": 7, "note": "é;"}
    result = execute(
        webhook(f"{url}/hook", signed=True),
        "webhook.send",
        {"WEBHOOK_SECRET": WEBHOOK_SECRET},
        payload=payload,
    )
    assert result == {"status": 200, "response": "thanks", "signed": True}
    got = rx.received[-1]
    timestamp = got["headers"][TIMESTAMP_HEADER.lower()]
    expected = (
        "sha256="
        + hmac.new(
            WEBHOOK_SECRET.encode(), f"{timestamp}.".encode() + got["body"], hashlib.sha256
        ).hexdigest()
    )
    assert hmac.compare_digest(expected, got["headers"][SIGNATURE_HEADER.lower()])
    assert abs(int(timestamp) - time.time()) < 60 and json.loads(got["body"]) == payload


def test_webhook_without_secret_sends_no_signature(receiver: tuple[Receiver, str]) -> None:
    rx, url = receiver
    execute(webhook(f"{url}/hook", signed=False), "webhook.send", {}, payload=[1, 2])
    headers = rx.received[-1]["headers"]
    assert SIGNATURE_HEADER.lower() not in headers and TIMESTAMP_HEADER.lower() not in headers


def test_webhook_failure_is_classified_and_not_retried(receiver: tuple[Receiver, str]) -> None:
    rx, url = receiver
    before = len(rx.received)
    with pytest.raises(BuiltinToolError) as caught:
        execute(
            webhook(f"{url}/hook?fail=1", signed=True),
            "webhook.send",
            {"WEBHOOK_SECRET": WEBHOOK_SECRET},
            payload={},
        )
    assert caught.value.category == "server_error" and caught.value.status_code == 503
    assert len(rx.received) == before + 1


def http_connector(url: str | None, **config: Any) -> BuiltinConnector:
    base = {"base_url": f"{url}/api/v1", "auth": {"type": "bearer"}} if url else {}
    credentials = {"token": "HTTP_TOKEN"} if url else {}
    defs = materialize_builtin(
        name="api", type_name="http", config={**base, **config}, credentials=credentials
    )
    return create_connector(defs)


def test_http_call_sends_the_credential_under_the_base_url(receiver: tuple[Receiver, str]) -> None:
    rx, url = receiver
    env = {"HTTP_TOKEN": HTTP_TOKEN}
    result = execute(
        http_connector(url), "http.call", env, method="POST", path="items", json={"a": 1}, query={"q": "x"}
    )
    assert result["status"] == 200 and result["json"] == {
        "method": "POST",
        "path": "/api/v1/items",
        "json": {"a": 1},
    }
    assert rx.received[-1]["query"] == {"q": "x"}
    with pytest.raises(BuiltinToolError, match="stay under"):
        execute(http_connector(url), "http.call", env, method="GET", path="../../public/x")
    with pytest.raises(BuiltinToolError, match="stay under"):
        execute(http_connector(url), "http.call", env, method="GET", path="https://elsewhere.example/steal")
    with pytest.raises(BuiltinToolError, match="set by the connector"):
        execute(http_connector(url), "http.call", env, method="GET", headers={"Authorization": "Bearer mine"})


def test_http_call_errors_do_not_echo_the_credential(receiver: tuple[Receiver, str]) -> None:
    _, url = receiver
    wrong = "http-Canary-wrong-77"
    with pytest.raises(BuiltinToolError) as caught:
        execute(http_connector(url), "http.call", {"HTTP_TOKEN": wrong}, method="GET", path="x")
    assert caught.value.category == "auth" and wrong not in caught.value.explanation
    with pytest.raises(BuiltinToolError) as moved:
        execute(http_connector(url), "http.call", {"HTTP_TOKEN": HTTP_TOKEN}, method="GET", path="moved")
    assert moved.value.category == "client_error"  # a redirect to another origin is not followed


def test_http_request_reads_without_any_credential(receiver: tuple[Receiver, str]) -> None:
    rx, url = receiver
    conn = http_connector(url)
    assert {t.name: t.sensitive for t in conn.list_tools()} == {"http.call": True, "http.request": False}
    result = execute(conn, "http.request", {"HTTP_TOKEN": HTTP_TOKEN}, url=f"{url}/public/page")
    assert result["text"] == "public page"
    assert "authorization" not in rx.received[-1]["headers"]


def test_http_request_alone_needs_no_config(receiver: tuple[Receiver, str]) -> None:
    _, url = receiver
    conn = http_connector(None, allow_hosts=["127.0.0.1"])
    assert [t.name for t in conn.list_tools()] == ["http.request"]
    assert execute(conn, "http.request", {}, url=f"{url}/public/a")["status"] == 200
    with pytest.raises(BuiltinToolError) as caught:
        execute(http_connector(None, allow_hosts=["example.test"]), "http.request", {}, url=f"{url}/public/a")
    assert caught.value.category == "forbidden"


def test_http_config_errors_name_the_field() -> None:
    with pytest.raises(ConnectorConfigError) as caught:
        materialize_builtin(name="api", type_name="http", config={"auth": {"type": "bearer"}}, credentials={})
    assert caught.value.field == "config.base_url"


def test_test_connection_logs_in_or_says_why_not(filled_imap: MailServer) -> None:
    async def tested(password: str) -> Any:
        conn = mail_connector(imap=filled_imap)
        return await conn.test_connection(env={MAIL_ENV: password})

    assert run(tested(filled_imap.password)).ok
    refused = run(tested("mail-wrong"))
    assert not refused.ok and refused.detail.startswith("auth:") and "mail-wrong" not in refused.detail


def test_redirects_are_followed_only_on_the_same_origin(receiver: tuple[Receiver, str]) -> None:
    rx, url = receiver
    # /api/v1/moved answers 302 to another origin: refused, not followed (the credential stays home).
    before = len(rx.received)
    with pytest.raises(BuiltinToolError):
        execute(http_connector(url), "http.call", {"HTTP_TOKEN": HTTP_TOKEN}, method="GET", path="moved")
    assert len(rx.received) == before + 1
    # A redirect within the origin is followed, method and body kept (307).
    env = {"HTTP_TOKEN": HTTP_TOKEN}
    hopped = execute(http_connector(url), "http.call", env, method="POST", path="hop", json={"a": 2})
    assert hopped["json"] == {"method": "POST", "path": "/api/v1/landed", "json": {"a": 2}}
