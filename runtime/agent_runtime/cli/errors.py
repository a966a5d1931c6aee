"""The CLI's errors: one line naming what happened and the fix, and an exit code scripts can branch on."""

from __future__ import annotations

import click

# Exit codes (kubectl/gh style). 2 is click's own for a usage error.
OK = 0
ERROR = 1
USAGE = 2
NOT_FOUND = 3
DENIED = 4  # forbidden or unauthenticated


class CliError(click.ClickException):
    """An error shown as `error: <message>` on stderr, no traceback, with its exit code."""

    def __init__(self, message: str, *, exit_code: int = ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: object = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)
