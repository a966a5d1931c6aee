"""Output: a table for people (Rich), `-o json` or `-o yaml` for scripts (the OE's answer as it came)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import click

FORMATS = ("table", "json", "yaml")

output_option = click.option(
    "-o",
    "--output",
    "output",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="table for people; json or yaml for scripts",
)

Column = tuple[str, Callable[[dict[str, Any]], Any]]


def cell(value: Any, *, width: int | None = 60) -> str:
    """One table cell: compact JSON for structures (cut at `width` in a list's row), empty for None."""
    if value is None:
        return ""
    if isinstance(value, dict | list):
        text = json.dumps(value, separators=(",", ":"))
        return text if width is None or len(text) <= width else text[: width - 3] + "..."
    return str(value)


def emit(
    data: Any, *, output: str, rows: Sequence[dict[str, Any]] | None = None, columns: Sequence[Column] = ()
) -> None:
    """Print `data` as json/yaml, or `rows` as a table of `columns` (a key/value table when no rows)."""
    if output == "json":
        click.echo(json.dumps(data, indent=2))
        return
    if output == "yaml":
        import yaml

        click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip())
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    if rows is None:
        table.add_column("FIELD")
        table.add_column("VALUE", overflow="fold")
        for key, value in (data or {}).items():
            table.add_row(key, cell(value, width=None))  # one object: every value in full
    else:
        for title, _ in columns:
            table.add_column(title, overflow="fold")
        for row in rows:
            table.add_row(*(cell(get(row)) for _, get in columns))
    Console(width=200 if not click.get_text_stream("stdout").isatty() else None).print(table)
