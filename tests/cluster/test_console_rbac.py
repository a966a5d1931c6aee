"""The console with the cluster's own identities and RBAC (issue 30), on a real API server, in Chromium.

The world of test_client_rbac.py: alice (edit in A), bob (view in A), carol (admin in B), each signing in
with an audience-bound ServiceAccount token. A viewer sees a held call with no decision buttons, and his
forged approval (with his own session's CSRF token, so only RBAC stops it) is a 403 naming agents/approve;
carol, admin in B, decides B's held call from her inbox and the execution names her.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Console, browser, console_for, playwright  # noqa: F401 - fixtures
from tests.cluster.test_client_rbac import World, _transfer, world  # noqa: F401 - the world fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]


def _signed_in(console_for: Callable[..., Console], world: World, who: str) -> Console:  # noqa: F811 - the fixtures
    console = console_for(world.oe_url)
    console.sign_in(world.tokens[who])
    console.page.wait_for_url("**/console/inbox")
    return console


def test_a_viewer_sees_no_buttons_and_his_forged_approval_is_refused_by_rbac(
    world: World,  # noqa: F811
    console_for: Callable[..., Console],  # noqa: F811
) -> None:
    a, b = world.ns_a, world.ns_b
    with world.http("alice") as alice, world.http("carol") as carol:
        held_a = alice.post("/invoke", json={"agent": f"{a}/loop", "input": _transfer("viewer")}).json()[
            "execution_id"
        ]
        held_b = carol.post("/invoke", json={"agent": f"{b}/loop", "input": _transfer("carol")}).json()[
            "execution_id"
        ]
    world.wait("alice", held_a, "suspended")
    world.wait("carol", held_b, "suspended")

    bob = _signed_in(console_for, world, "bob")
    expect(bob.page.locator("#who")).to_have_text(world.user("bob"))
    bob.page.wait_for_selector("#app[data-ready=true]")
    # His inbox holds only calls he may decide: none.
    expect(bob.page.locator("#status")).to_have_text("Nothing waits for your decision.")
    expect(bob.page.locator("article.held")).to_have_count(0)

    bob.ready(f"/console/executions/{held_a}")
    held = bob.page.locator("article.held")
    expect(held).to_be_visible()
    expect(held.locator("pre.args")).to_contain_text('"to": "viewer"')
    expect(held).to_contain_text("You may read this call but not decide it")
    assert bob.page.locator("button.approve, button.reject, button.approve-edited, #cancel").count() == 0

    # A forged approval from his own session (right CSRF token): the OE's RBAC refuses it.
    csrf = bob.page.get_attribute('meta[name="csrf-token"]', "content")
    forged = bob.context.request.post(
        bob.url(f"/console/api/api/v1/projects/{a}/executions/{held_a}/resume"),
        data={"decision": "approved"},
        headers={"x-csrf-token": csrf or ""},
    )
    assert forged.status == 403, forged.text()
    details = forged.json()["details"]
    assert (details["resource"], details["namespace"]) == ("agents/approve", a)
    cancel = bob.context.request.post(
        bob.url(f"/console/api/execution/{held_a}/cancel"), data={}, headers={"x-csrf-token": csrf or ""}
    )
    assert cancel.status == 403 and cancel.json()["details"]["resource"] == "agents/cancel"
    # B's execution does not exist for him.
    response = bob.page.goto(bob.url(f"/console/executions/{held_b}"))
    assert response is not None and response.status == 200
    expect(bob.page.locator("p.error")).to_contain_text("no execution")
    backlog = bob.context.request.get(bob.url(f"/console/data/events?execution={held_b}"))
    assert backlog.status == 404, "the timeline's backlog is authorized as reading the execution"
    assert world.wait("alice", held_a, "suspended")["status"] == "suspended"

    # carol (admin in B) decides B's call from her inbox; A's is not hers to see.
    carol_console = _signed_in(console_for, world, "carol")
    card = carol_console.page.locator(f'article.held[data-execution="{held_b}"]')
    expect(card).to_be_visible(timeout=15_000)
    expect(carol_console.page.locator(f'article.held[data-execution="{held_a}"]')).to_have_count(0)
    card.locator("button.approve").click()
    expect(card).to_have_count(0)
    done = world.wait("carol", held_b, "completed")
    assert done["reviews"][-1]["decided_by"]["username"] == world.user("carol")


def test_oidc_sign_in_with_pkce_against_the_issuer_the_api_server_trusts(
    world: World,  # noqa: F811
    console_for: Callable[..., Console],  # noqa: F811
) -> None:
    issuer = world.cluster.oidc
    assert issuer is not None
    # dana is in the OIDC group ops, admins of B (the world's RoleBinding for group oidc:ops).
    issuer.login_as = ("dana", ("ops",))
    with world.http("carol") as carol:
        held_b = carol.post(
            "/invoke", json={"agent": f"{world.ns_b}/loop", "input": _transfer("dana")}
        ).json()["execution_id"]
    world.wait("carol", held_b, "suspended")

    dana = console_for(world.oe_url, ignore_https_errors=True)
    dana.page.goto(dana.url("/console/sign-in"))
    dana.page.click("a[href='/console/oidc/start']")
    dana.page.wait_for_url("**/console/inbox", timeout=20_000)
    expect(dana.page.locator("#who")).to_have_text("oidc:dana")
    assert dana.page.evaluate("document.cookie") == ""
    card = dana.page.locator(f'article.held[data-execution="{held_b}"]')
    expect(card).to_be_visible(timeout=15_000)
    card.locator("button.approve").click()
    expect(card).to_have_count(0)
    done = world.wait("carol", held_b, "completed")
    assert done["reviews"][-1]["decided_by"]["username"] == "oidc:dana"
    assert issuer.refused == [], "the code was redeemed with the verifier of its S256 challenge"

    # A callback that did not start in this browser (another's code and state) makes no session.
    other = console_for(world.oe_url, ignore_https_errors=True)
    started = other.context.request.get(other.url("/console/oidc/start"), max_redirects=0)
    assert started.status == 303
    location = started.headers["location"]
    assert "code_challenge_method=S256" in location and "code_challenge=" in location
    authorized = other.context.request.get(location, max_redirects=0)
    callback = authorized.headers["location"]
    stranger = console_for(world.oe_url, ignore_https_errors=True)
    refused = stranger.page.goto(callback)
    assert refused is not None and refused.status == 403
    assert stranger.context.request.get(stranger.url("/console/data/me")).status == 401
