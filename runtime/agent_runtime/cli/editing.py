"""`approve --edit`: the held call's arguments opened in $EDITOR, checked as a JSON object before they go.

Bad JSON re-opens the editor on what was written (at a terminal, after asking) or aborts with the
problem (in a script). Saving nothing is a cancel: nothing is sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from agent_runtime.cli.errors import ERROR, USAGE, CliError

Editor = Callable[[str], str | None]


def edited_args(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The edited arguments, or the problem with them (one line naming where and what to write)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        return None, f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if not isinstance(value, dict):
        return None, "not a JSON object: the call's arguments are an object of name to value"
    return value, None


def _editor(text: str) -> str | None:
    # click.edit runs $VISUAL or $EDITOR on a temporary file and answers None when nothing was saved.
    try:
        return click.edit(text, extension=".json", require_save=True)
    except click.ClickException as exc:
        raise CliError(
            f"the editor failed ({exc.format_message()}); nothing was sent: set EDITOR to an editor that "
            "exits 0 when saved, or pass --args JSON"
        ) from None


def edit_held_args(
    held: dict[str, Any],
    *,
    editor: Editor = _editor,
    ask_again: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """Open `held` in the editor until it is a JSON object; raises CliError on a cancel or a refusal."""
    text = json.dumps(held, indent=2) + "\n"
    while True:
        written = editor(text)
        if written is None:
            raise CliError("edit cancelled: nothing was saved, nothing was sent", exit_code=ERROR)
        value, problem = edited_args(written)
        if value is not None:
            return value
        again = ask_again or _ask_at_terminal
        if not again(problem or ""):
            raise CliError(
                f"the edited arguments are {problem}; nothing was sent (fix them, or pass --args JSON)",
                exit_code=USAGE,
            )
        text = written


def _ask_at_terminal(problem: str) -> bool:
    """At a terminal: say what is wrong and ask to edit again; in a script: no."""
    if not click.get_text_stream("stdin").isatty():
        return False
    click.echo(f"error: the edited arguments are {problem}", err=True)
    return click.confirm("edit again?", default=True, err=True)
