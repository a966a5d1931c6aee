"""The console's pure parts (issue 30): sessions, the on/off setting, the security headers, the page shells
(every server-side value escaped) and the chart's `oe.console.enabled`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_runtime.console.app import STATIC_DIR, console_enabled
from agent_runtime.console.headers import CSP, with_security_headers
from agent_runtime.console.pages import View, shell_page, sign_in_page
from agent_runtime.console.sessions import MemorySessionRows, SessionStore, _key, cookie_header
from agent_runtime.oe.store import SqliteStore
from tests.cluster.controlplane import cache_root, pinned_versions
from tests.unit.test_chart_render import one, pod, render


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _sqlite(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "oe.db")


def test_a_session_is_found_by_its_cookie_value_only_until_it_expires(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock = Clock()
        db = _sqlite(tmp_path)
        await db.open()
        try:
            store = SessionStore(db, ttl_s=60, clock=clock)
            assert store.shared
            session_id, session = await store.create(token="secret-bearer", username="alice")
            assert await store.get(session_id) == session
            assert session.token not in session_id and len(session_id) >= 43
            assert await store.get(session_id + "x") is None
            assert await store.get(None) is None and await store.get("a" * 500) is None
            # The store keys a session by the cookie value's digest and holds the token sealed under a key
            # derived from it: neither the cookie value nor the token is in the file.
            await db.close()
            raw = await asyncio.to_thread(lambda: b"".join(f.read_bytes() for f in tmp_path.iterdir()))
            assert session_id.encode() not in raw and b"secret-bearer" not in raw
            await db.open()
            assert await store.get(session_id) == session  # and it outlives the process's memory
            clock.now += 61
            assert await store.get(session_id) is None
            await store.create(token="t2", username="bob")  # a new session prunes the expired row
            assert await db.prune_console_sessions(now=clock.now + 1, limit=10) == 0  # alice's went
            assert await db.prune_console_sessions(now=clock.now + 61, limit=10) == 1  # bob's, expired
        finally:
            await db.close()

    asyncio.run(scenario())


def test_a_session_row_does_not_open_without_its_cookie(tmp_path: Path) -> None:
    """A row copied under another cookie's key (a store dump replayed) unseals to nothing."""

    async def scenario() -> None:
        rows = MemorySessionRows()
        store = SessionStore(rows)
        first, _ = await store.create(token="t-first", username="a")
        second, _ = await store.create(token="t-second", username="b")
        stolen = await rows.get_console_session(_key(first), now=0)
        assert stolen is not None
        await rows.put_console_session(stolen.model_copy(update={"key": _key(second)}))
        assert await store.get(second) is None
        assert await store.get(first) is not None

    asyncio.run(scenario())


def test_memory_sessions_are_bounded_oldest_first_and_dropped_on_sign_out() -> None:
    async def scenario() -> None:
        store = SessionStore(MemorySessionRows(max_sessions=2))
        assert not store.shared
        first, _ = await store.create(token="t1", username="a")
        second, _ = await store.create(token="t2", username="b")
        await store.get(first)  # recently used: kept
        third, _ = await store.create(token="t3", username="c")
        assert await store.get(second) is None
        assert await store.get(first) is not None and await store.get(third) is not None
        await store.drop(first)
        assert await store.get(first) is None

    asyncio.run(scenario())


def test_csrf_tokens_differ_per_session_and_compare_exactly() -> None:
    async def scenario() -> None:
        store = SessionStore()
        _, one_session = await store.create(token="t", username="a")
        _, other = await store.create(token="t", username="a")
        assert one_session.csrf != other.csrf
        assert one_session.csrf_matches(one_session.csrf)
        assert not one_session.csrf_matches(other.csrf)
        assert not one_session.csrf_matches(None) and not one_session.csrf_matches("")

    asyncio.run(scenario())


def test_the_cookie_is_httponly_secure_and_strict() -> None:
    header = cookie_header("ae_console", "abc", max_age=60)
    assert header == "ae_console=abc; Path=/console; Max-Age=60; HttpOnly; Secure; SameSite=Strict"


@pytest.mark.parametrize(
    ("raw", "on"), [("", True), ("true", True), ("1", True), ("false", False), ("0", False)]
)
def test_the_console_is_on_unless_turned_off(raw: str, on: bool) -> None:
    assert console_enabled({"OE_CONSOLE_ENABLED": raw}) is on
    assert console_enabled({}) is True


def test_a_bad_on_off_value_names_the_setting() -> None:
    with pytest.raises(ValueError, match="OE_CONSOLE_ENABLED must be true or false"):
        console_enabled({"OE_CONSOLE_ENABLED": "maybe"})


def test_the_security_headers_replace_any_of_the_same_name() -> None:
    headers = with_security_headers([(b"content-security-policy", b"default-src *"), (b"x-other", b"1")])
    assert (b"content-security-policy", CSP.encode()) in headers
    assert (b"content-security-policy", b"default-src *") not in headers
    assert (b"x-other", b"1") in headers
    assert "script-src 'self'" in CSP and "unsafe" not in CSP and "frame-ancestors 'none'" in CSP


def test_page_shells_escape_every_value_and_inline_no_script() -> None:
    hostile = '"><script>alert(1)</script>'
    view = View(page="execution", title="Execution", execution_id=hostile)
    html = shell_page(view, username=hostile, csrf="c")
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # The only script is the package's own file; no inline handler or style.
    assert html.count("<script") == 1 and 'src="/console/static/console.js"' in html
    assert "onclick" not in html and "style=" not in html
    form = sign_in_page(login_csrf='x"y', message=hostile)
    assert "<script>alert" not in form and 'value="x&quot;y"' in form


def test_the_chart_turns_the_console_off() -> None:
    helm = cache_root() / f"k8s-{pinned_versions()['K8S_VERSION']}" / "bin" / "helm"
    if not helm.exists():
        pytest.skip(f"no helm at {helm}: run `make cluster-bins`")

    def env(**values: str) -> dict[str, str]:
        container = pod(one(render(helm, **values), "Deployment", "agent-engine-oe"))["containers"][0]
        return {e["name"]: e["value"] for e in container["env"] if "value" in e}

    assert env()["OE_CONSOLE_ENABLED"] == "true"
    off = env(oe__console__enabled="false")["OE_CONSOLE_ENABLED"]
    assert off == "false" and console_enabled({"OE_CONSOLE_ENABLED": off}) is False


def test_the_static_assets_ship_in_the_package() -> None:
    static = Path(STATIC_DIR)
    assert {p.name for p in static.iterdir()} >= {"console.js", "console.css"}
    script = (static / "console.js").read_text()
    # Text only: the script never parses a value as HTML or code.
    sinks = ("innerHTML", "outerHTML", "insertAdjacentHTML", "eval(", "new Function", "document.write")
    for forbidden in sinks:
        assert forbidden not in script, forbidden
