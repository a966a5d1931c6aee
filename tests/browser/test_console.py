"""The console in a real browser (issue 30): sign-in, the inbox live, edit-validate-approve, reject with
notes, the timeline to completion, audit, Agents; and the attacks: a stolen-looking cookie, forged POSTs,
`<script>` and `javascript:` in tool arguments, the CSP on every page.

Each test drives Debian's Chromium through Playwright against the real OE, AER and Tool Pod processes of
the loop tier (tests/integration/loop/harness.py), signed in with the static development token.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest
from playwright.sync_api import Locator, Request, expect

from agent_runtime.console.headers import CSP
from tests.browser.conftest import IMAGES, Console, resume_path, transfer, view
from tests.integration.loop.harness import CLIENT_TOKEN, Platform

pytestmark = pytest.mark.timeout(240)

PAGES = ("/console/inbox", "/console/executions", "/console/agents")


def card(console: Console, execution_id: str) -> Locator:
    return console.page.locator(f'article.held[data-execution="{execution_id}"]')


def test_sign_in_keeps_the_token_server_side_and_every_page_has_the_csp(
    console_for: Callable[..., Console], platform: Platform
) -> None:
    signed = console_for(platform.oe_url)
    page = signed.page
    first = page.goto(signed.url("/console/inbox"))
    assert first is not None
    assert page.url.endswith("/console/sign-in"), "a page without a session goes to the sign-in form"
    assert first.headers["content-security-policy"] == CSP

    signed.sign_in("not-the-token")
    expect(page.locator("p.error[role=alert]")).to_contain_text("not accepted")

    signed.sign_in(CLIENT_TOKEN)
    page.wait_for_url("**/console/inbox")
    page.wait_for_selector("#app[data-ready=true]")
    expect(page.locator("#who")).to_have_text("agent-engine:static-token")
    # The browser holds an opaque id only: no script can read the cookie, and it is not the token.
    assert page.evaluate("document.cookie") == ""
    cookies = {c["name"]: c for c in signed.context.cookies()}
    session = cookies["ae_console"]
    assert session["httpOnly"] and session["secure"] and session["sameSite"] == "Strict"
    assert CLIENT_TOKEN not in session["value"]
    assert CLIENT_TOKEN not in page.content()

    seen: dict[str, str | None] = {}
    page.on("response", lambda r: seen.__setitem__(r.url, r.headers.get("content-security-policy")))
    execution_id = platform.invoke({"mode": "calls", "calls": [["shout", {"text": "hello"}]]})
    platform.wait(execution_id, "completed")
    for path in (*PAGES, f"/console/executions/{execution_id}", f"/console/executions/{execution_id}/audit"):
        response = page.goto(signed.url(path))
        assert response is not None and response.status == 200, path
        page.wait_for_selector("#app[data-ready=true]")
        expect(page.locator("p.error")).to_have_count(0)
    console_urls = [url for url in seen if "/console/" in url]
    assert any("/console/static/console.js" in url for url in console_urls)
    assert any("/console/api/execution/" in url for url in console_urls)
    assert any("/console/data/" in url for url in console_urls)
    missing = [url for url in console_urls if seen[url] != CSP]
    assert missing == [], f"responses without the CSP: {missing}"

    # Signed out, the same cookie opens nothing.
    page.goto(signed.url("/console/inbox"))
    page.click("form.who button[type=submit]")
    page.wait_for_url("**/console/sign-in")
    answer = signed.context.request.get(signed.url("/console/data/me"))
    assert answer.status == 401


def test_a_held_call_appears_is_edited_with_validation_approved_and_runs_to_completion(
    console: Console, platform: Platform
) -> None:
    page = console.page
    console.ready("/console/inbox")
    page.evaluate("window.__sameDocument = 'kept'")
    execution_id = platform.invoke(transfer(5, "acct-1"))
    held = card(console, execution_id)
    expect(held).to_be_visible(timeout=15_000)
    assert page.evaluate("window.__sameDocument") == "kept", "the call appeared without a reload"
    expect(held.locator("pre.args")).to_contain_text('"to": "acct-1"')
    page.screenshot(path=str(IMAGES / "console-inbox.png"), full_page=True)

    sent: list[Request] = []
    page.on("request", lambda r: sent.append(r) if r.method == "POST" else None)
    held.locator("details.edit summary").click()
    editor = held.locator("textarea.json")
    editor.fill('{"amount": "a lot", "to": "acct-2"}')
    held.locator("button.approve-edited").click()
    expect(held.locator("p.error[role=alert]")).to_contain_text("amount: must be integer")
    editor.fill('{"amount": 7, "to": "acct-2", "memo": "x"}')
    held.locator("button.approve-edited").click()
    expect(held.locator("p.error[role=alert]")).to_contain_text("memo")
    editor.fill("{not json")
    held.locator("button.approve-edited").click()
    expect(held.locator("p.error[role=alert]")).to_contain_text("Not JSON")
    page.wait_for_timeout(300)
    assert sent == [], "an invalid edit is refused in the page: nothing is sent"
    assert view(platform, execution_id)["status"] == "suspended"

    editor.fill('{"amount": 7, "to": "acct-2"}')
    held.locator("button.approve-edited").click()
    expect(held).to_have_count(0)
    expect(page.locator("#decided li").first).to_contain_text("approved by agent-engine:static-token")
    assert [r.url for r in sent] == [platform.oe_url + resume_path(execution_id)]

    console.ready(f"/console/executions/{execution_id}")
    expect(page.locator("#execution-status")).to_have_text("completed", timeout=20_000)
    page.wait_for_selector("#app[data-final=true]")
    steps = page.locator("#timeline li.step")
    # Step 1 ran, then the resumed run replayed it from the cache; step 2 ran once, approved.
    # Step 1 ran, step 2 was held; the resumed run replayed step 1 from the cache and ran step 2, approved.
    expect(steps).to_have_count(4)
    expect(steps.filter(has_text="tool shout").first).to_contain_text("success · executed")
    expect(steps.filter(has_text="tool shout").nth(1)).to_contain_text("from the replay cache")
    transfer_rows = steps.filter(has_text="tool transfer")
    expect(transfer_rows).to_have_count(2)
    expect(transfer_rows.first).to_contain_text("held for a human decision")
    expect(transfer_rows.nth(1)).to_contain_text("route tool_pod · success · executed")
    expect(page.locator("#decisions")).to_contain_text("approved by agent-engine:static-token")
    expect(page.locator("pre.result")).to_contain_text('"ok": true')
    page.screenshot(path=str(IMAGES / "console-timeline.png"), full_page=True)
    assert platform.ledger.read_text().splitlines()[-1] == "7 acct-2"

    console.ready(f"/console/executions/{execution_id}/audit")
    audit = page.locator("#audit")
    expect(page.locator("#chain")).to_contain_text("Audit chain intact")
    expect(audit).to_contain_text("requested")
    expect(audit).to_contain_text('"amount": 5')
    expect(audit).to_contain_text('"amount": 7')


def test_reject_with_notes_and_a_call_decided_elsewhere_disappears(
    console: Console, platform: Platform
) -> None:
    page = console.page
    console.ready("/console/inbox")
    rejected = platform.invoke(transfer(9, "acct-9"))
    elsewhere = platform.invoke(transfer(3, "acct-3"))
    expect(card(console, rejected)).to_be_visible(timeout=15_000)
    expect(card(console, elsewhere)).to_be_visible(timeout=15_000)

    held = card(console, rejected)
    held.locator("textarea[aria-label='Notes for the rejection']").fill("not this account")
    held.locator("button.reject").click()
    expect(held).to_have_count(0)
    expect(page.locator("#decided")).to_contain_text("rejected by agent-engine:static-token")
    settled = platform.wait(rejected, "completed", "failed")
    review = settled["reviews"][-1]
    assert (review["decision"], review["reviewer_notes"]) == ("rejected", "not this account")
    assert review["decided_by"]["username"] == "agent-engine:static-token"

    # Decided by someone else through the API: the card leaves the open page on its own.
    page.evaluate("window.__sameDocument = 'kept'")
    with platform.client() as http:
        answer = http.post(
            f"/api/v1/projects/team-a/executions/{elsewhere}/resume", json={"decision": "approved"}
        )
    assert answer.status_code == 202, answer.text
    expect(card(console, elsewhere)).to_have_count(0, timeout=10_000)
    assert page.evaluate("window.__sameDocument") == "kept"


SCRIPT = "<script>window.__pwned = 'script'</script><img src=x onerror=\"window.__pwned = 'img'\">"
JS_URL = "javascript:window.__pwned='link'"


def test_script_and_javascript_urls_in_tool_arguments_render_inert(
    console: Console, platform: Platform
) -> None:
    page = console.page
    execution_id = platform.invoke(transfer(1, SCRIPT + " " + JS_URL))
    platform.wait(execution_id, "suspended")
    timeline = f"/console/executions/{execution_id}"
    for path in ("/console/inbox", timeline, f"{timeline}/audit"):
        console.ready(path)
        if path == "/console/inbox":
            expect(card(console, execution_id)).to_be_visible(timeout=15_000)
        else:
            expect(page.locator("#app")).to_contain_text("<script>", timeout=15_000)
        assert page.evaluate("window.__pwned") is None, path
        # The markup is there as text, never as elements or links.
        # (JSON shows the argument with its quotes escaped: look for the parts without quotes.)
        expect(page.locator("#app")).to_contain_text("<script>window.__pwned = 'script'</script>")
        expect(page.locator("#app")).to_contain_text("<img src=x onerror=")
        expect(page.locator("#app")).to_contain_text(JS_URL)
        assert page.locator("#app script, #app img, #app [onerror]").count() == 0
        hrefs = page.eval_on_selector_all("a", "links => links.map(a => a.getAttribute('href'))")
        assert all(href.startswith("/console/") for href in hrefs), hrefs
        for link in page.locator("#app a").all():
            link.focus()
        assert page.evaluate("window.__pwned") is None
    with platform.client() as http:
        http.post(f"/execution/{execution_id}/cancel")


def test_forged_posts_are_refused_and_nothing_changes(console: Console, platform: Platform) -> None:
    execution_id = platform.invoke(transfer(2, "acct-forged"))
    platform.wait(execution_id, "suspended")
    console.ready(f"/console/executions/{execution_id}")
    csrf = console.page.get_attribute('meta[name="csrf-token"]', "content")
    assert csrf
    request = console.context.request
    target = console.url(resume_path(execution_id))
    body = {"decision": "approved"}
    # The session cookie rides along (same context), but without this session's CSRF token: 403.
    no_token = request.post(target, data=body)
    wrong_token = request.post(target, data=body, headers={"x-csrf-token": "0" * 43})
    other_origin = request.post(
        target, data=body, headers={"x-csrf-token": csrf, "origin": "http://evil.example"}
    )
    cancel = request.post(console.url(f"/console/api/execution/{execution_id}/cancel"), data={})
    assert [r.status for r in (no_token, wrong_token, other_origin, cancel)] == [403, 403, 403, 403]
    assert no_token.json()["error"] == "csrf"
    # Without the cookie, the CSRF token alone is nothing either.
    bare = httpx.post(platform.oe_url + resume_path(execution_id), json=body, headers={"x-csrf-token": csrf})
    assert bare.status_code == 401
    # A bearer token sent to the console's gateway is dropped: only the session's counts.
    smuggled = httpx.post(
        platform.oe_url + resume_path(execution_id),
        json=body,
        headers={"authorization": f"Bearer {CLIENT_TOKEN}", "x-csrf-token": csrf},
    )
    assert smuggled.status_code == 401
    time.sleep(0.3)
    assert view(platform, execution_id)["status"] == "suspended"
    assert "acct-forged" not in (platform.ledger.read_text() if platform.ledger.exists() else "")

    # The same request with the page's token goes through (the check above refused only the forgery).
    allowed = request.post(target, data={"decision": "rejected"}, headers={"x-csrf-token": csrf})
    assert allowed.status == 202, allowed.text()


def test_keyboard_alone_and_320_px(console_for: Callable[..., Console], platform: Platform) -> None:
    narrow = console_for(platform.oe_url, width=320, height=700)
    narrow.sign_in(CLIENT_TOKEN)
    narrow.page.wait_for_url("**/console/inbox")
    execution_id = platform.invoke(transfer(4, "acct-keyboard"))
    held = card(narrow, execution_id)
    expect(held).to_be_visible(timeout=15_000)
    page = narrow.page
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"the inbox is {overflow}px wider than a 320px screen"
    approve = held.locator("button.approve")
    for _ in range(60):
        page.keyboard.press("Tab")
        if approve.evaluate("b => b === document.activeElement"):
            break
    else:
        raise AssertionError("Tab never reached the Approve button")
    page.keyboard.press("Enter")
    expect(held).to_have_count(0)
    assert platform.wait(execution_id, "completed")["reviews"][-1]["decision"] == "approved"
    for path in PAGES:
        narrow.ready(path)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 320, f"{path} is {width}px wide at 320px"


def test_agents_page_marks_sensitive_tools_and_lists_connector_types(console: Console) -> None:
    console.ready("/console/agents")
    agent = console.page.locator('article[data-agent="team-a/loop"]')
    expect(agent).to_be_visible()
    expect(agent.locator("tr", has_text="transfer")).to_contain_text("sensitive")
    expect(agent.locator("tr", has_text="shout")).not_to_contain_text("sensitive")
    expect(console.page.locator("#connector-types li").first).to_be_visible()


def test_executions_filter_by_status_and_who_invoked_and_cancel_from_the_timeline(
    console: Console, platform: Platform
) -> None:
    page = console.page
    done = platform.invoke({"mode": "calls", "calls": [["shout", {"text": "listed"}]]})
    held = platform.invoke(transfer(6, "acct-cancel"))
    platform.wait(done, "completed")
    platform.wait(held, "suspended")

    console.ready("/console/executions?status=suspended")
    rows = page.locator("#executions tbody tr")
    expect(rows.filter(has=page.locator(f'a[href="/console/executions/{held}"]'))).to_have_count(1)
    expect(page.locator(f'#executions tr[data-execution="{done}"]')).to_have_count(0)
    states = set(page.locator("#executions .state").all_inner_texts())
    assert states == {"suspended"}, states
    page.select_option("#filter-status", "completed")
    expect(page.locator(f'#executions tr[data-execution="{done}"]')).to_have_count(1)
    assert page.url.endswith("/console/executions?status=completed")
    page.fill("#filter-invoked_by", "nobody-invoked-these")
    page.dispatch_event("#filter-invoked_by", "change")
    expect(rows).to_have_count(0)
    # Filtered by the OE across the whole list (part of the name, any case), not within the rows shown.
    with page.expect_response(lambda r: "/console/data/executions?" in r.url) as answer:
        page.fill("#filter-invoked_by", "STATIC-token")
        page.dispatch_event("#filter-invoked_by", "change")
    assert answer.value.ok
    expect(page.locator(f'#executions tr[data-execution="{done}"]')).to_have_count(1)

    console.ready(f"/console/executions/{held}")
    page.click("#cancel")
    expect(page.locator("#execution-status")).to_have_text("cancelled", timeout=15_000)
    expect(page.locator("#summary")).to_contain_text("Cancelled by")
    assert platform.wait(held, "cancelled")["cancelled_by"]["username"] == "agent-engine:static-token"


def test_a_model_steps_usage_shows_on_the_timeline_and_the_audit(
    console: Console, platform: Platform
) -> None:
    execution_id = platform.invoke({"mode": "llm", "text": "count the words in hello brave new world"})
    platform.wait(execution_id, "completed", "failed")
    console.ready(f"/console/executions/{execution_id}")
    console.page.wait_for_selector("#app[data-final=true]")
    expect(console.page.locator("#timeline li.step").filter(has_text="model").first).to_contain_text("in ")
    expect(console.page.locator("#usage")).to_contain_text("Tokens: in ")
    console.ready(f"/console/executions/{execution_id}/audit")
    expect(console.page.locator("#audit td.usage").filter(has_text="out ").first).to_be_visible()
