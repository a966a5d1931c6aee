"""`agentengine logs ID`: an execution's durable log (issue 33): lifecycle changes, steps, graph nodes."""

from __future__ import annotations

import time
from typing import Any

import click

from agent_runtime.cli.output import emit, output_option
from agent_runtime.cli.session import open_client

LOG_COLUMNS = (
    ("AT", lambda row: _at(row.get("at"))),
    ("COMPONENT", lambda row: row.get("component")),
    ("EVENT", lambda row: row.get("event")),
    ("STEP", lambda row: row.get("step")),
    ("NAME", lambda row: row.get("node") or row.get("tool")),
    ("STATUS", lambda row: row.get("status")),
    ("TRACE", lambda row: row.get("trace_id")),
)


def _at(value: Any) -> str | None:
    if not isinstance(value, int | float):
        return None
    return time.strftime("%H:%M:%S", time.gmtime(value)) + f".{int(value * 1000) % 1000:03d}"


@click.command()
@click.argument("execution_id")
@output_option
@click.pass_context
def logs(ctx: click.Context, execution_id: str, output: str) -> None:
    """The execution's log: lifecycle changes, steps and LangGraph nodes, in order, with trace ids."""
    client, _ = open_client(ctx)
    with client:
        body = client.execution_logs(execution_id)
    records = list(body.get("records", []))
    if not body.get("enabled", True) and output == "table":
        click.echo(str(body.get("detail") or "this OE keeps no execution log"), err=True)
    emit(body, output=output, rows=records, columns=LOG_COLUMNS)
