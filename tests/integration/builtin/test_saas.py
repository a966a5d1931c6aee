"""slack, github, notion, stripe and google against the loopback SaaS peer speaking their wire formats,
including their error shapes, 429 with Retry-After, and Google's token refresh."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest

from agent_runtime.connectors.builtin.registry import create_connector, materialize_builtin
from agent_runtime.connectors.errors import CredentialMissingError, ToolArgumentError
from agent_runtime.connectors.framework import BuiltinConnector, BuiltinToolError
from tests.integration.builtin.conftest import run
from tests.providers import saas_peer as sp
from tests.providers.saas_peer import SaasPeer

ENV = {
    "SLACK_TOKEN": sp.SLACK_TOKEN,
    "GITHUB_TOKEN": sp.GITHUB_TOKEN,
    "NOTION_TOKEN": sp.NOTION_TOKEN,
    "STRIPE_KEY": sp.STRIPE_KEY,
    "GOOGLE_CLIENT_SECRET": sp.GOOGLE_CLIENT_SECRET,
    "GOOGLE_REFRESH_TOKEN": sp.GOOGLE_REFRESH_TOKEN,
}


def make(peer: SaasPeer, kind: str) -> BuiltinConnector:
    configs: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
        "slack": ({"base_url": peer.base("slack")}, {"token": "SLACK_TOKEN"}),
        "github": ({"base_url": peer.base("github")}, {"token": "GITHUB_TOKEN"}),
        "notion": ({"base_url": peer.base("notion")}, {"token": "NOTION_TOKEN"}),
        "stripe": ({"base_url": peer.base("stripe")}, {"api_key": "STRIPE_KEY"}),
        "google": (
            {
                "client_id": sp.GOOGLE_CLIENT_ID,
                "token_url": peer.base("google_token"),
                "sheets_base_url": peer.base("sheets"),
                "drive_base_url": peer.base("drive"),
            },
            {"client_secret": "GOOGLE_CLIENT_SECRET", "refresh_token": "GOOGLE_REFRESH_TOKEN"},
        ),
    }
    config, credentials = configs[kind]
    defs = materialize_builtin(name=kind, type_name=kind, config=config, credentials=credentials)
    return create_connector(defs)


def call(conn: BuiltinConnector, tool: str, env: Mapping[str, str] = ENV, **arguments: Any) -> Any:
    async def go() -> Any:
        try:
            return await conn.execute(tool, arguments, env=env)
        finally:
            await conn.aclose()

    return run(go())


def failure(
    conn: BuiltinConnector, tool: str, env: Mapping[str, str] = ENV, **arguments: Any
) -> BuiltinToolError:
    with pytest.raises(BuiltinToolError) as caught:
        call(conn, tool, env, **arguments)
    for canary in sp.CANARIES:
        assert canary not in caught.value.explanation
    return caught.value


# Slack -----------------------------------------------------------------------------------------------------


def test_slack_post_reply_and_list(saas: SaasPeer) -> None:
    posted = call(make(saas, "slack"), "slack.post_message", channel="C001", text="deploy done")
    assert posted["channel"] == "C001" and posted["ts"]
    reply = call(
        make(saas, "slack"), "slack.reply_thread", channel="C001", thread_ts=posted["ts"], text="ack"
    )
    assert reply["thread_ts"] == posted["ts"]
    assert saas.slack_messages[-1] == {
        "channel": "C001",
        "text": "ack",
        "thread_ts": posted["ts"],
        "ts": reply["ts"],
    }
    request = saas.requests[-1]
    assert request["headers"]["authorization"] == f"Bearer {sp.SLACK_TOKEN}"
    assert request["headers"]["content-type"] == "application/json"
    first = call(make(saas, "slack"), "slack.list_channels", limit=2)
    assert [c["name"] for c in first["channels"]] == ["general", "alerts"] and first["next_cursor"] == "2"
    rest = call(make(saas, "slack"), "slack.list_channels", limit=2, cursor=first["next_cursor"])
    assert [c["id"] for c in rest["channels"]] == ["G003"] and rest["next_cursor"] is None


def test_slack_ok_false_is_classified(saas: SaasPeer) -> None:
    error = failure(make(saas, "slack"), "slack.post_message", channel="C999", text="hi")
    assert (error.category, error.explanation) == ("not_found", "Slack refused the call: channel_not_found")
    bad = failure(
        make(saas, "slack"), "slack.post_message", {"SLACK_TOKEN": "xoxb-wrong"}, channel="C001", text="x"
    )
    assert bad.category == "auth"


def test_slack_429_on_a_write_is_rate_limited_with_retry_after(saas: SaasPeer) -> None:
    saas.fail_next("slack", 429, {"ok": False, "error": "ratelimited"}, **{"Retry-After": "30"})
    before = len(saas.slack_messages)
    error = failure(make(saas, "slack"), "slack.post_message", channel="C001", text="hi")
    assert error.category == "rate_limited" and error.retry_after_s == 30
    assert "retry after 30 s" in error.explanation
    assert len(saas.slack_messages) == before  # a write is never retried by the connector


def test_slack_429_on_a_read_is_retried_after_retry_after(saas: SaasPeer) -> None:
    saas.fail_next("slack", 429, {"ok": False, "error": "ratelimited"}, **{"Retry-After": "1"})
    started = time.monotonic()
    listed = call(make(saas, "slack"), "slack.list_channels")
    assert len(listed["channels"]) == 3
    assert time.monotonic() - started >= 0.9


def test_slack_without_its_secret_names_the_env(saas: SaasPeer) -> None:
    with pytest.raises(CredentialMissingError, match="SLACK_TOKEN"):
        call(make(saas, "slack"), "slack.list_channels", {})


def test_arguments_are_checked_before_anything_is_sent(saas: SaasPeer) -> None:
    count = len(saas.requests)
    with pytest.raises(ToolArgumentError, match=r"arguments.text: is required"):
        call(make(saas, "slack"), "slack.post_message", channel="C001")
    with pytest.raises(ToolArgumentError, match=r"arguments.extra: is not a known field"):
        call(make(saas, "slack"), "slack.post_message", channel="C001", text="x", extra=1)
    assert len(saas.requests) == count


# GitHub ------------------------------------------------------------------------------------------------


def test_github_issue_lifecycle_on_an_enterprise_base_url(saas: SaasPeer) -> None:
    created = call(
        make(saas, "github"),
        "github.create_issue",
        owner="acme",
        repo="widgets",
        title="Broken",
        body="b",
        labels=["bug"],
    )
    assert created["number"] >= 1 and created["labels"] == ["bug"]
    assert saas.requests[-1]["path"] == "/github/api/v3/repos/acme/widgets/issues"
    headers = saas.requests[-1]["headers"]
    assert (
        headers["accept"] == "application/vnd.github+json" and headers["x-github-api-version"] == "2022-11-28"
    )
    got = call(
        make(saas, "github"), "github.get_issue", owner="acme", repo="widgets", issue_number=created["number"]
    )
    assert got["title"] == "Broken" and got["body"] == "b"
    comment = call(
        make(saas, "github"),
        "github.comment_issue",
        owner="acme",
        repo="widgets",
        issue_number=created["number"],
        body="on it",
    )
    assert comment["id"] >= 9000
    listed = call(make(saas, "github"), "github.list_issues", owner="acme", repo="widgets")
    assert any(i["number"] == created["number"] and i["comments"] == 1 for i in listed["issues"])


def test_github_errors(saas: SaasPeer) -> None:
    missing = failure(
        make(saas, "github"), "github.get_issue", owner="acme", repo="widgets", issue_number=999
    )
    assert missing.category == "not_found" and missing.status_code == 404
    invalid = failure(
        make(saas, "github"), "github.create_issue", {**ENV}, owner="acme", repo="widgets", title=" "
    )
    assert (invalid.category, invalid.status_code) == ("client_error", 422)
    assert "Validation Failed" in invalid.explanation
    denied = failure(
        make(saas, "github"),
        "github.get_issue",
        {"GITHUB_TOKEN": "ghp_wrong"},
        owner="acme",
        repo="widgets",
        issue_number=1,
    )
    assert denied.category == "auth" and "ghp_wrong" not in denied.explanation
    saas.fail_next(
        "github", 403, {"message": "API rate limit exceeded for user ID 1."}, **{"x-ratelimit-remaining": "0"}
    )
    limited = failure(make(saas, "github"), "github.create_issue", owner="acme", repo="widgets", title="x")
    assert limited.category == "rate_limited"
    with pytest.raises(ToolArgumentError, match=r"arguments\.owner: must match"):
        call(make(saas, "github"), "github.get_issue", owner="../..", repo="widgets", issue_number=1)


def test_github_echoed_token_is_redacted(saas: SaasPeer) -> None:
    wrong = "ghp_Canary_echoed_by_provider"
    error = failure(
        make(saas, "github"), "github.list_issues", {"GITHUB_TOKEN": wrong}, owner="acme", repo="widgets"
    )
    assert error.category == "auth"
    assert wrong not in error.explanation and "[redacted]" in error.explanation.lower()


# Notion ------------------------------------------------------------------------------------------------


def test_notion_create_search_query_append(saas: SaasPeer) -> None:
    props = {"Name": {"title": [{"text": {"content": "Launch plan"}}]}}
    page = call(make(saas, "notion"), "notion.create_page", parent_database_id="db1", properties=props)
    assert page["id"].startswith("page-")
    assert saas.requests[-1]["headers"]["notion-version"] == "2022-06-28"
    found = call(make(saas, "notion"), "notion.search", query="launch")
    assert [r["title"] for r in found["results"]] == ["Launch plan"]
    rows = call(make(saas, "notion"), "notion.query_database", database_id="db1", page_size=10)
    assert rows["results"][0]["id"] == page["id"]
    block = {
        "object": "block",
        "type": "paragraph",
        "paragraph": {"rich_text": [{"text": {"content": "hi"}}]},
    }
    appended = call(make(saas, "notion"), "notion.append_block", block_id=page["id"], children=[block])
    assert appended["appended"] == 1 and saas.notion_blocks[page["id"]] == [block]


def test_notion_errors(saas: SaasPeer) -> None:
    missing = failure(make(saas, "notion"), "notion.query_database", database_id="nope")
    assert missing.category == "not_found" and "Could not find database" in missing.explanation
    saas.fail_next(
        "notion",
        429,
        {"object": "error", "status": 429, "code": "rate_limited", "message": "slow down"},
        **{"Retry-After": "45"},
    )
    limited = failure(
        make(saas, "notion"), "notion.append_block", block_id="b1", children=[{"object": "block"}]
    )
    assert limited.category == "rate_limited" and limited.retry_after_s == 45
    both = failure(
        make(saas, "notion"), "notion.create_page", parent_page_id="p", parent_database_id="d", properties={}
    )
    assert both.category == "invalid_arguments"


# Stripe ------------------------------------------------------------------------------------------------


def test_stripe_customer_charges_refund(saas: SaasPeer) -> None:
    customer = call(make(saas, "stripe"), "stripe.get_customer", customer_id="cus_1")
    assert customer["email"] == "ada@example.test"
    charges = call(make(saas, "stripe"), "stripe.list_charges", customer_id="cus_1")
    assert [c["id"] for c in charges["charges"]] == ["ch_1"]
    refund = call(
        make(saas, "stripe"),
        "stripe.create_refund",
        charge="ch_1",
        amount=1000,
        reason="requested_by_customer",
    )
    assert refund["status"] == "succeeded" and refund["amount"] == 1000
    request = saas.requests[-1]
    assert request["headers"]["content-type"].startswith("application/x-www-form-urlencoded")
    assert request["body"] == b"charge=ch_1&amount=1000&reason=requested_by_customer"
    assert request["headers"]["idempotency-key"]


def test_stripe_errors(saas: SaasPeer) -> None:
    missing = failure(make(saas, "stripe"), "stripe.get_customer", customer_id="cus_404")
    assert missing.category == "not_found" and "No such customer" in missing.explanation
    too_much = failure(make(saas, "stripe"), "stripe.create_refund", charge="ch_2", amount=999999)
    assert too_much.category == "client_error" and "greater than unrefunded" in too_much.explanation
    bad_key = failure(
        make(saas, "stripe"), "stripe.get_customer", {"STRIPE_KEY": "sk_test_wrong"}, customer_id="cus_1"
    )
    assert bad_key.category == "auth" and "sk_test_wrong" not in bad_key.explanation
    saas.fail_next("stripe", 500, {"error": {"type": "api_error", "message": "Something went wrong"}})
    server = failure(make(saas, "stripe"), "stripe.create_refund", charge="ch_2")
    assert server.category == "server_error"


# Google --------------------------------------------------------------------------------------------------


def test_google_token_refresh_then_sheets_and_drive(saas: SaasPeer) -> None:
    saas.sheets["sheet1"] = [["name", "qty"], ["apple", "3"]]
    conn = make(saas, "google")

    async def session() -> list[Any]:
        try:
            out = [
                await conn.execute(
                    "gsheets.read_range", {"spreadsheet_id": "sheet1", "range": "Sheet1!A1:B2"}, env=ENV
                )
            ]
            out.append(
                await conn.execute(
                    "gsheets.append_row",
                    {"spreadsheet_id": "sheet1", "range": "Sheet1!A:B", "values": ["pear", 4]},
                    env=ENV,
                )
            )
            out.append(await conn.execute("gdrive.list_files", {"q": "name contains 'report'"}, env=ENV))
            out.append(await conn.execute("gdrive.get_file", {"file_id": "f1"}, env=ENV))
            out.append(await conn.execute("gdrive.get_file", {"file_id": "d1"}, env=ENV))
            return out
        finally:
            await conn.aclose()

    tokens_before = len(saas.access_tokens)
    read, appended, listed, text_file, doc = run(session())
    assert read["values"] == [["name", "qty"], ["apple", "3"]]
    assert appended["updated_cells"] == 2 and saas.sheets["sheet1"][-1] == ["pear", 4]
    assert [f["name"] for f in listed["files"]] == ["report.txt"]
    assert text_file["content"] == "hello drive" and doc["content"] == "the plan, as text"
    assert len(saas.access_tokens) == tokens_before + 1  # one refresh served the whole session
    token_request = next(r for r in reversed(saas.requests) if r["provider"] == "google_token")
    assert b"grant_type=refresh_token" in token_request["body"]


def test_google_refreshes_again_when_the_access_token_is_refused(saas: SaasPeer) -> None:
    saas.sheets["s2"] = [["x"]]
    conn = make(saas, "google")

    async def session() -> Any:
        try:
            await conn.execute("gsheets.read_range", {"spreadsheet_id": "s2", "range": "A1"}, env=ENV)
            saas.revoked_access.add(saas.access_tokens[-1])
            return await conn.execute("gsheets.read_range", {"spreadsheet_id": "s2", "range": "A1"}, env=ENV)
        finally:
            await conn.aclose()

    before = len(saas.access_tokens)
    assert run(session())["values"] == [["x"]]
    assert len(saas.access_tokens) == before + 2


def test_google_errors(saas: SaasPeer) -> None:
    revoked = failure(
        make(saas, "google"), "gdrive.list_files", {**ENV, "GOOGLE_REFRESH_TOKEN": "1//Canary-revoked"}
    )
    assert revoked.category == "auth" and "expired or revoked" in revoked.explanation
    assert "1//Canary-revoked" not in revoked.explanation
    missing = failure(make(saas, "google"), "gsheets.read_range", spreadsheet_id="nope", range="A1")
    assert missing.category == "not_found"
    saas.fail_next(
        "drive",
        429,
        {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}},
        **{"Retry-After": "120"},
    )
    limited = failure(make(saas, "google"), "gdrive.list_files")
    assert limited.category == "rate_limited" and limited.retry_after_s == 120


def test_test_connection_against_each_provider(saas: SaasPeer) -> None:
    for kind in ("slack", "github", "notion", "stripe", "google"):
        conn = make(saas, kind)

        async def tested(c: BuiltinConnector = conn) -> Any:
            try:
                return await c.test_connection(env=ENV)
            finally:
                await c.aclose()

        result = run(tested())
        assert result.ok, (kind, result.detail)
