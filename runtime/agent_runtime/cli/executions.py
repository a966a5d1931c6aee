"""Executions: invoke, get, audit, cancel and the event stream."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from agent_runtime.cli.errors import USAGE, CliError
from agent_runtime.cli.follow import Renderer
from agent_runtime.cli.output import emit, output_option
from agent_runtime.cli.session import open_client

FINAL = ("completed", "failed", "cancelled")
SETTLED = (*FINAL, "suspended")
POLL_S = 0.2

EXECUTION_COLUMNS = (
    ("ID", lambda row: row.get("execution_id")),
    ("AGENT", lambda row: row.get("agent")),
    ("STATUS", lambda row: row.get("status")),
    ("STEPS", lambda row: row.get("step_count")),
    ("CREATED", lambda row: row.get("created_at")),
    ("BY", lambda row: (row.get("invoked_by") or {}).get("username")),
)
AUDIT_COLUMNS = (
    ("STEP", lambda row: row.get("step")),
    ("KIND", lambda row: row.get("kind")),
    ("TOOL", lambda row: row.get("tool")),
    ("DECISION", lambda row: row.get("decision")),
    ("ARGS", lambda row: row.get("args")),
    ("BY", lambda row: (row.get("decided_by") or {}).get("username")),
)


def children_of(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The child executions an execution's agentRef calls started, from its step audit records (issue 38):
    one per step, the latest record's status."""
    found: dict[Any, dict[str, Any]] = {}
    for record in records:
        detail = record.get("detail") or {}
        if record.get("kind") == "tool" and detail.get("child_execution_id"):
            found[record.get("step")] = {
                "step": record.get("step"),
                "tool": record.get("tool"),
                "execution_id": detail["child_execution_id"],
                "agent": detail.get("child_agent"),
                "status": detail.get("child_status"),
            }
    return list(found.values())


def parse_input(raw: str | None, *, text: str | None = None) -> Any:
    """`--input`: JSON text, `@file` holding JSON, or `@-` (stdin); `--text T` is `{"text": T}`; a clear
    usage error otherwise (and when both are given)."""
    if text is not None:
        if raw is not None:
            raise CliError("give --input or --text, not both", exit_code=USAGE)
        return {"text": text}
    if raw is None:
        return {}
    text = raw
    if raw == "@-":
        text = click.get_text_stream("stdin").read()
    elif raw.startswith("@"):
        path = Path(raw[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"--input {raw}: cannot read {path} ({exc.strerror})", exit_code=USAGE) from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(
            f"--input is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            'give a JSON value, e.g. --input \'{"text": "hi"}\', or @file.json',
            exit_code=USAGE,
        ) from None


def agent_ref(agent: str, namespace: str) -> str:
    """`NS/NAME` as given, or NAME in the target namespace."""
    if agent.count("/") > 1 or agent.startswith("/") or agent.endswith("/"):
        raise CliError(f"AGENT {agent!r}: give NAME or NAMESPACE/NAME", exit_code=USAGE)
    return agent if "/" in agent else f"{namespace}/{agent}"


def _follow(client: Any, execution_id: str, *, output: str, stop_at_suspended: bool) -> str | None:
    """Print events as they come; the last event's type (a final one, or `suspended` when asked to stop)."""
    last = None
    renderer = Renderer()
    try:
        for event in client.events(execution_id):
            last = event.get("type")
            if output == "json":
                click.echo(json.dumps(event))
            else:
                click.echo(renderer.feed(event), nl=False)
            if last in FINAL or (stop_at_suspended and last == "suspended"):
                break
    finally:
        click.echo(renderer.close(), nl=False)
    return last


def _wait(client: Any, execution_id: str) -> dict[str, Any]:
    while True:
        view = client.execution(execution_id)
        if view.get("status") in SETTLED:
            return view
        time.sleep(POLL_S)


def _settled_exit(view: dict[str, Any]) -> None:
    # A failed or cancelled execution is an error for a script that waited on it.
    if view.get("status") in ("failed", "cancelled"):
        raise CliError(f"execution {view.get('execution_id')} {view.get('status')}: {error_text(view)}")
    if view.get("status") == "suspended":
        click.echo(
            f"execution {view['execution_id']} is held for review: "
            f"agentengine approve {view['execution_id']} (or reject)",
            err=True,
        )


def error_text(view: dict[str, Any]) -> str:
    error = view.get("error")
    return json.dumps(error) if isinstance(error, dict | list) else str(error or "")


@click.command()
@click.argument("agent")
@click.option(
    "-i", "--input", "raw_input", metavar="JSON|@FILE", help="the agent's input (JSON, @file or @- for stdin)"
)
@click.option("--text", metavar="TEXT", help="shorthand for --input '{\"text\": TEXT}'")
@click.option("--session", "session_id", help="session id (the agent's conversation)")
@click.option("--wait", is_flag=True, help="wait until the execution completes, fails or is held for review")
@click.option(
    "-f",
    "--follow",
    "-w",
    "--watch",
    "watch",
    is_flag=True,
    help="follow each step (its route, cached or not, the model's text) until it settles",
)
@output_option
@click.pass_context
def invoke(
    ctx: click.Context,
    agent: str,
    raw_input: str | None,
    text: str | None,
    session_id: str | None,
    wait: bool,
    watch: bool,
    output: str,
) -> None:
    """Invoke AGENT (NAME or NAMESPACE/NAME) with --input or --text."""
    value = parse_input(raw_input, text=text)
    client, where = open_client(ctx)
    with client:
        started = client.invoke(
            agent=agent_ref(agent, where.namespace), input=value, session_id=session_id, stream=watch
        )
        execution_id = started["execution_id"]
        if watch:
            if output == "table":
                click.echo(f"execution {execution_id}")
            _follow(client, execution_id, output=output, stop_at_suspended=True)
        if not (wait or watch):
            emit(started, output=output)
            return
        view = _wait(client, execution_id)
    if watch and output == "json":
        click.echo(json.dumps(view))  # JSON Lines: every event, then the settled execution
    elif not watch or output != "table":
        emit(view, output=output)
    elif view.get("status") == "completed":
        click.echo(json.dumps(view.get("result")))
    _settled_exit(view)


@click.group()
def get() -> None:
    """Show executions."""


@get.command("executions")
@click.option("-A", "--all-namespaces", is_flag=True, help="every namespace the caller may read")
@click.option("--status", type=click.Choice(["queued", "pending", "running", *SETTLED]))
@click.option("--agent", help="only this Agent (NAMESPACE/NAME)")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--cursor", help="the next page: the next_cursor a previous page gave")
@output_option
@click.pass_context
def get_executions(
    ctx: click.Context,
    all_namespaces: bool,
    status: str | None,
    agent: str | None,
    limit: int,
    cursor: str | None,
    output: str,
) -> None:
    """List executions, newest first."""
    client, where = open_client(ctx)
    with client:
        page = client.executions(
            project=None if all_namespaces else where.namespace,
            status=status,
            agent=agent,
            limit=limit,
            cursor=cursor,
        )
    emit(page, output=output, rows=page.get("items", []), columns=EXECUTION_COLUMNS)
    if output == "table" and page.get("next_cursor"):
        click.echo(f"more: --cursor {page['next_cursor']}", err=True)


@get.command("execution")
@click.argument("execution_id")
@output_option
@click.pass_context
def get_execution(ctx: click.Context, execution_id: str, output: str) -> None:
    """Show one execution: its parent when an agentRef call started it, the children its calls started."""
    client, _ = open_client(ctx)
    with client:
        view = client.execution(execution_id)
        children = children_of(client.audit(execution_id))
    if children:
        view["children"] = children
    emit(view, output=output)


@click.command()
@click.argument("execution_id")
@output_option
@click.pass_context
def audit(ctx: click.Context, execution_id: str, output: str) -> None:
    """The execution's audit records, in order."""
    client, _ = open_client(ctx)
    with client:
        records = client.audit(execution_id)
    emit({"records": records}, output=output, rows=records, columns=AUDIT_COLUMNS)


@click.command()
@click.argument("execution_id")
@output_option
@click.pass_context
def cancel(ctx: click.Context, execution_id: str, output: str) -> None:
    """Cancel an execution (durable; its runtimes are drained)."""
    client, _ = open_client(ctx)
    with client:
        emit(client.cancel(execution_id), output=output)


@click.command()
@click.argument("execution_id")
@click.option("-w", "--watch", is_flag=True, help="follow until the execution ends")
@click.option("--after", type=click.IntRange(0), default=0, help="only events after this seq")
@click.option(
    "-o", "--output", type=click.Choice(["table", "json"]), default="table", help="json: one event a line"
)
@click.pass_context
def events(ctx: click.Context, execution_id: str, watch: bool, after: int, output: str) -> None:
    """The execution's events (the OE's SSE stream); -w follows it."""
    client, _ = open_client(ctx)
    with client:
        # Without -w: what the OE sends at once (every stored event), then stop once it falls quiet.
        renderer = Renderer()
        try:
            for event in client.events(execution_id, after=after, idle_timeout=None if watch else 1.0):
                if output == "json":
                    click.echo(json.dumps(event))
                else:
                    click.echo(renderer.feed(event), nl=False)
        finally:
            click.echo(renderer.close(), nl=False)


@click.command()
@click.argument("execution_id")
@click.argument("step", type=click.IntRange(1))
@output_option
@click.pass_context
def interrupt(ctx: click.Context, execution_id: str, step: int, output: str) -> None:
    """Interrupt the call at STEP of a running execution (the agent sees it fail as interrupted)."""
    client, _ = open_client(ctx)
    with client:
        emit(client.interrupt(execution_id, step=step), output=output)
