"""The browser tier (issue 30): Debian's Chromium driven by Playwright for Python, against real processes.

One platform per module (the loop tier's: an OE, an AER, a Tool Pod, an LLM peer and a provider, each the
launcher in its mode on loopback) and one headless Chromium. `tests/browser/install.sh` (run by
`make browser`, which `make test` needs) installs Chromium from Debian; Playwright's own browser download
is never used: the launch names `/usr/bin/chromium`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from tests.conftest import Process
from tests.integration.loop.harness import CLIENT_TOKEN, LLM_KEY, Platform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer

CHROMIUM = os.environ.get("CONSOLE_BROWSER", "/usr/bin/chromium")
IMAGES = Path(__file__).resolve().parents[2] / "docs" / "img"


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
        ).start()


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make browser` (tests/browser/install.sh)", pytrace=False)
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    yield browser
    browser.close()


@dataclass
class Console:
    """A browser context signed in (or not) to one OE's console."""

    base: str
    context: BrowserContext
    page: Page

    def url(self, path: str) -> str:
        return self.base + path

    def sign_in(self, token: str) -> None:
        self.page.goto(self.url("/console/sign-in"))
        self.page.fill("#token", token)
        self.page.click("button[type=submit]")

    def ready(self, path: str) -> None:
        self.page.goto(self.url(path))
        self.page.wait_for_selector("#app[data-ready=true]", timeout=15_000)


@pytest.fixture
def console_for(browser: Browser) -> Iterator[Callable[..., Console]]:
    """A fresh browser context per call (own cookies), closed after the test."""
    contexts: list[BrowserContext] = []

    def open_console(
        base: str, *, width: int = 1280, height: int = 900, ignore_https_errors: bool = False
    ) -> Console:
        context = browser.new_context(
            viewport={"width": width, "height": height},
            base_url=base,
            ignore_https_errors=ignore_https_errors,  # the cluster tier's OIDC issuer has the test CA's cert
        )
        contexts.append(context)
        return Console(base=base, context=context, page=context.new_page())

    yield open_console
    for context in contexts:
        with contextlib.suppress(Exception):
            context.close()


@pytest.fixture
def console(console_for: Callable[..., Console], platform: Platform) -> Console:
    signed = console_for(platform.oe_url)
    signed.sign_in(CLIENT_TOKEN)
    signed.page.wait_for_url("**/console/inbox")
    return signed


def invoke(platform: Platform, task: Any) -> str:
    return platform.invoke(task)


def transfer(amount: Any, to: str) -> dict[str, Any]:
    """Two steps: a plain tool, then the sensitive `transfer` (held for approval)."""
    calls = [["shout", {"text": "before the transfer"}], ["transfer", {"amount": amount, "to": to}]]
    return {"mode": "calls", "calls": calls}


def resume_path(execution_id: str, project: str = "team-a") -> str:
    return f"/console/api/api/v1/projects/{project}/executions/{execution_id}/resume"


def view(platform: Platform, execution_id: str) -> dict[str, Any]:
    with httpx.Client(base_url=platform.oe_url, headers={"authorization": f"Bearer {CLIENT_TOKEN}"}) as http:
        return dict(http.get(f"/execution/{execution_id}").json())


def dumps(value: Any) -> str:
    return json.dumps(value)
