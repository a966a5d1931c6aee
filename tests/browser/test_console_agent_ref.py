"""The console for agentRef (issue 38), in Chromium against real processes: a child's page links its parent;
a parent held on its child's hold links the child's page, on its own page and on its inbox card, instead
of offering decision buttons, and the child's own page decides it, after which the parent completes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Console
from tests.conftest import Process
from tests.integration.loop.harness import AGENT, LLM_KEY, Platform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, module_spawn: Callable[..., Process]
) -> Iterator[Platform]:
    with running_llm_peer(api_key=LLM_KEY) as peer, running_echo_provider() as provider:
        yield Platform(
            tmp=tmp_path_factory.mktemp("platform"),
            spawn=module_spawn,
            llm_base_url=peer.base_url,
            provider_url=provider.url,
            registration={"agentRefs": [{"tool": "agent.loop", "agent": AGENT}]},
        ).start()


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"mode": "calls", "calls": [list(pair) for pair in pairs]}


def test_the_parent_links_its_held_child_and_the_child_links_its_parent(
    console: Console, platform: Platform
) -> None:
    page = console.page
    parent = platform.invoke(calls(("agent.loop", {"input": calls(("transfer", {"amount": 2, "to": "x"}))})))
    hold = platform.wait(parent, "suspended")["suspension"]
    child = hold["payload"]["child_execution_id"]

    # The inbox's card for the parent links the child instead of offering decisions.
    console.ready("/console/inbox")
    card = page.locator(f'article.held[data-execution="{parent}"]')
    expect(card.locator(".child-hold a")).to_have_attribute("href", f"/console/executions/{child}")
    expect(card.locator("button.approve")).to_have_count(0)

    console.ready(f"/console/executions/{parent}")
    expect(page.locator("#child-hold")).to_contain_text("transfer at step 1")
    expect(page.locator("#child-link")).to_have_attribute("href", f"/console/executions/{child}")
    expect(page.locator("#held button")).to_have_count(0)  # decided in the child's review, not here

    page.click("#child-link")
    page.wait_for_selector("#app[data-ready=true]", timeout=15_000)
    expect(page.locator("#parent-link")).to_have_attribute("href", f"/console/executions/{parent}")
    expect(page.locator("#summary")).to_contain_text("step 1")
    page.locator("#held button.approve").click()
    expect(page.locator("#execution-status")).to_have_text("completed", timeout=15_000)
    assert platform.wait(parent, "completed")["status"] == "completed"
