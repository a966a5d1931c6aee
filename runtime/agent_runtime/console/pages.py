"""The console's HTML: a sign-in form and one page shell per view, rendered on the server.

Every value put into the HTML goes through `html.escape` here; what a page shows beyond its shell (tool
arguments, model text, errors) comes from the client API as JSON and `console.js` sets it as DOM text,
never as HTML. No inline script or style: the CSP forbids both.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

NAV: tuple[tuple[str, str], ...] = (
    ("inbox", "Inbox"),
    ("executions", "Executions"),
    ("agents", "Agents"),
)


@dataclass(frozen=True)
class View:
    """Which page the shell is for, and what the script needs to know about it."""

    page: str  # inbox | executions | execution | audit | agents
    title: str
    execution_id: str = ""


def _head(title: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} · Agent Engine</title>"
        '<link rel="stylesheet" href="/console/static/console.css">'
    )


def sign_in_page(*, login_csrf: str, message: str = "", oidc: bool = False) -> str:
    """The sign-in form: paste a bearer token, or (when configured) sign in with the OIDC issuer.

    console.js sends the form as JSON (the OE's body guard reads every body as JSON, and a form-encoded
    token can look like an out-of-range number to it)."""
    alert = f'<p class="error" role="alert" id="sign-in-error">{escape(message)}</p>' if message else ""
    oidc_link = (
        '<p><a class="button" href="/console/oidc/start">Sign in with your identity provider</a></p>'
        if oidc
        else ""
    )
    return (
        _head("Sign in")
        + '<script src="/console/static/console.js" defer></script>'
        + '</head><body><main class="narrow"><h1>Agent Engine console</h1>'
        + alert
        + '<form method="post" action="/console/sign-in" class="stack" id="sign-in">'
        + f'<input type="hidden" name="login_csrf" value="{escape(login_csrf)}">'
        + '<label for="token">Bearer token</label>'
        + '<textarea id="token" name="token" rows="4" required autocomplete="off" spellcheck="false"'
        + ' placeholder="kubectl create token NAME --audience agent-engine"></textarea>'
        + '<button type="submit">Sign in</button></form>'
        + oidc_link
        + '<p class="hint">The token stays on the server: this browser keeps only a session cookie.</p>'
        + "</main></body></html>"
    )


def _nav(current: str) -> str:
    links = []
    for page, label in NAV:
        marker = ' aria-current="page"' if page == current else ""
        links.append(f'<a href="/console/{page}"{marker}>{label}</a>')
    return "".join(links)


def shell_page(view: View, *, username: str, csrf: str) -> str:
    """A signed-in page: the header, the navigation and an empty `main` the script fills."""
    return (
        _head(view.title)
        + f'<meta name="csrf-token" content="{escape(csrf)}">'
        + '<script src="/console/static/console.js" defer></script></head><body>'
        + '<header><nav aria-label="Console">'
        + _nav(view.page)
        + '</nav><form method="post" action="/console/sign-out" class="who" id="sign-out">'
        + f'<span id="who">{escape(username)}</span> <button type="submit">Sign out</button></form>'
        + "</header>"
        + f'<main id="app" data-page="{escape(view.page)}" data-execution="{escape(view.execution_id)}"'
        + ' aria-live="polite">'
        + f'<h1>{escape(view.title)}</h1><p class="hint" id="status">Loading…</p></main>'
        + "</body></html>"
    )


def oidc_done_page() -> str:
    """After the OIDC callback: the script moves on to the inbox (a same-site navigation, see app.py)."""
    return (
        _head("Signed in")
        + '<script src="/console/static/console.js" defer></script></head><body><main class="narrow">'
        + '<h1 id="oidc-done">Signed in</h1><p><a href="/console/inbox">Continue to the inbox</a></p>'
        + "</main></body></html>"
    )
