"""A running execution in the console (issue 30): the model's text on the timeline as it streams (and inert),
Interrupt on the running model call and Cancel on a running execution, pressed in the page with the status
followed live; token usage and its cost from the Agent's own prices.

Its own platform, so the test scripts the loopback model peer: a turn whose last chunk waits for a file
holds the model call running (in the Tool Pod, Decision 9) for as long as the test needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Console
from tests.conftest import Process
from tests.integration.loop.harness import AGENT, LLM_KEY, Platform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import RunningLLMPeer, Turn, running_llm_peer

pytestmark = pytest.mark.timeout(240)

# Per million tokens: the cost the OE counts from the Agent's own prices (spec.pricing in a cluster).
PRICES = {"currency": "USD", "models": {"loop-model": {"input": 1000.0, "output": 2000.0}}}
HOSTILE = 'Thinking <script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> done'


@pytest.fixture(scope="module")
def llm_peer() -> Iterator[RunningLLMPeer]:
    with running_llm_peer(api_key=LLM_KEY) as peer:
        yield peer


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, module_spawn: Callable[..., Process], llm_peer: RunningLLMPeer
) -> Iterator[Platform]:
    with running_echo_provider() as provider:
        yield Platform(
            tmp=tmp_path_factory.mktemp("running"),
            spawn=module_spawn,
            llm_base_url=llm_peer.base_url,
            provider_url=provider.url,
            registration={"prices": PRICES},
        ).start()


@pytest.fixture(autouse=True)
def _fresh_script(llm_peer: RunningLLMPeer) -> None:
    llm_peer.reset()


def _invoke_streaming(platform: Platform, task: Any) -> str:
    with platform.client() as client:
        response = client.post("/invoke", json={"agent": AGENT, "input": task, "stream": True})
    assert response.status_code == 202, response.text
    return str(response.json()["execution_id"])


def _held_model_turn(llm_peer: RunningLLMPeer, release: Path, *, text: str) -> None:
    llm_peer.push(Turn(text=text, hold_last_until=str(release), chunk_delay_s=0.02))


def test_streamed_model_text_shows_as_it_streams_inert_and_interrupt_stops_the_running_call(
    console: Console, platform: Platform, llm_peer: RunningLLMPeer, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    _held_model_turn(llm_peer, release, text=HOSTILE)
    execution_id = _invoke_streaming(platform, {"mode": "llm", "text": "think out loud"})
    page = console.page
    console.ready(f"/console/executions/{execution_id}")
    step = page.locator('#timeline li.step[data-step="1"]')
    # The text arrives while the model call still runs (its last chunk is held): streamed, not at the end.
    expect(step.locator("pre.model-text")).to_contain_text(
        "<script>window.__pwned = 1</script>", timeout=20_000
    )
    expect(step).to_have_class("step running")
    assert not release.exists()
    # Inert: the markup is text, nothing ran, no element was made from it.
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#timeline script, #timeline img").count() == 0
    assert "<img src=x" in step.locator("pre.model-text").inner_text()

    interrupt = step.locator("button.interrupt")
    expect(interrupt).to_be_visible()
    with page.expect_response(lambda r: r.url.endswith(f"/execution/{execution_id}/interrupt")) as answer:
        interrupt.click()
    assert answer.value.ok, answer.value.text()
    # The Tool Pod stops the call: the step finishes in error (never the model's answer), the run fails,
    # and the page follows both without a reload.
    expect(step).not_to_have_class("step running", timeout=20_000)
    expect(step).to_contain_text("error")
    expect(page.locator("#execution-status")).to_have_text("failed", timeout=20_000)
    assert platform.wait(execution_id, "failed")["status"] == "failed"
    release.touch()


def test_cancel_a_running_execution_from_its_timeline(
    console: Console, platform: Platform, llm_peer: RunningLLMPeer, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    _held_model_turn(llm_peer, release, text="a long answer that never ends")
    execution_id = _invoke_streaming(platform, {"mode": "llm", "text": "take your time"})
    page = console.page
    console.ready(f"/console/executions/{execution_id}")
    expect(page.locator('#timeline li.step[data-step="1"]')).to_have_class("step running", timeout=20_000)
    expect(page.locator("#execution-status")).to_have_text("running")
    page.click("#cancel")
    expect(page.locator("#execution-status")).to_have_text("cancelled", timeout=20_000)
    expect(page.locator("#summary")).to_contain_text("Cancelled by")
    assert platform.wait(execution_id, "cancelled")["status"] == "cancelled"
    release.touch()


def test_token_usage_and_its_cost_from_the_agents_prices(console: Console, platform: Platform) -> None:
    execution_id = platform.invoke({"mode": "llm", "text": "count the words in hello brave new world"})
    assert platform.wait(execution_id, "completed")["status"] == "completed"
    page = console.page
    console.ready(f"/console/executions/{execution_id}")
    page.wait_for_selector("#app[data-final=true]")
    usage = page.locator("#usage")
    expect(usage).to_contain_text("Tokens: in ")
    expect(usage).to_contain_text(" · cost ")
    text = usage.inner_text()
    tokens_in = int(text.split("in ", 1)[1].split(" ", 1)[0])
    tokens_out = int(text.split("out ", 1)[1].split(" ", 1)[0])
    cost = float(text.split("cost ", 1)[1].split()[0])
    assert tokens_in > 0 and tokens_out > 0
    # The page's total is the audit's, priced at the Agent's own table (per million tokens).
    assert cost == pytest.approx((tokens_in * 1000.0 + tokens_out * 2000.0) / 1e6, rel=1e-3)
    expect(page.locator("#timeline li.step").filter(has_text="model").first).to_contain_text("cost ")
    console.ready(f"/console/executions/{execution_id}/audit")
    expect(page.locator("#audit td.usage").filter(has_text="cost ").first).to_be_visible()
