"""Human review: the pending held calls, approve and reject."""

from __future__ import annotations

import json
from typing import Any

import click

from agent_runtime.cli.errors import USAGE, CliError
from agent_runtime.cli.output import emit, output_option
from agent_runtime.cli.session import open_client

REVIEW_COLUMNS = (
    ("ID", lambda row: row.get("execution_id")),
    ("AGENT", lambda row: row.get("agent")),
    ("KIND", lambda row: row.get("asks", {}).get("kind")),
    ("STEP", lambda row: row.get("asks", {}).get("step")),
    ("TOOL", lambda row: row.get("asks", {}).get("tool")),
    ("ARGS", lambda row: row.get("asks", {}).get("args")),
    ("REASON", lambda row: row.get("asks", {}).get("reason")),
    ("WAITING SINCE", lambda row: row.get("waiting_since")),
)


def parse_value(raw: str | None) -> Any:
    """`--value`: the JSON a held LangGraph `interrupt()` returns when approved."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise CliError(
            f"--value is not JSON ({exc.msg}); quote a string as JSON too, e.g. --value '\"Ada\"'",
            exit_code=USAGE,
        ) from None


def parse_args(raw: str | None) -> dict[str, Any] | None:
    """`--args`: a JSON object replacing the held call's arguments."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise CliError(
            f"--args is not JSON ({exc.msg}); give the call's new arguments as an object, "
            "e.g. --args '{\"amount\": 7}'",
            exit_code=USAGE,
        ) from None
    if not isinstance(value, dict):
        raise CliError("--args must be a JSON object (the held call's arguments)", exit_code=USAGE)
    return value


def newest_first(pages: list[dict[str, Any]], *, limit: int) -> list[dict[str, Any]]:
    """The items of several namespaces' review pages as one list, newest first."""
    items = [item for page in pages for item in page.get("items", [])]
    return sorted(items, key=lambda item: item.get("waiting_since") or "", reverse=True)[:limit]


@click.command()
@click.option("-A", "--all-namespaces", is_flag=True, help="every namespace the caller may read")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@output_option
@click.pass_context
def reviews(ctx: click.Context, all_namespaces: bool, limit: int, output: str) -> None:
    """The executions waiting for a reviewer, newest first."""
    client, where = open_client(ctx)
    with client:
        if all_namespaces:
            # The reviewer's view is per namespace: find the namespaces with a suspended execution first.
            held = client.executions(project=None, status="suspended", limit=500)
            namespaces = sorted({item["project_id"] for item in held.get("items", [])})
            pages = [client.reviews(project=namespace, limit=limit) for namespace in namespaces]
            page: dict[str, Any] = {"items": newest_first(pages, limit=limit), "next_cursor": None}
        else:
            page = client.reviews(project=where.namespace, limit=limit)
    emit(page, output=output, rows=page.get("items", []), columns=REVIEW_COLUMNS)


def held_args(view: dict[str, Any]) -> dict[str, Any]:
    """The arguments a suspended execution's held call asks to run with; an error when none is held."""
    suspension = view.get("suspension")
    if view.get("status") != "suspended" or not isinstance(suspension, dict):
        raise CliError(
            f"execution {view.get('execution_id')} is {view.get('status')}, not suspended: nothing to edit "
            "(see agentengine reviews)"
        )
    if suspension.get("kind") != "approval_required":
        raise CliError(
            f"execution {view.get('execution_id')} is held by the agent ({suspension.get('kind')}), not by a "
            "tool call: there are no arguments to edit; approve or reject it without --edit"
        )
    args = suspension.get("args")
    return dict(args) if isinstance(args, dict) else {}


@click.command()
@click.argument("execution_id")
@click.option("--notes", help="the reviewer's notes (kept in the audit)")
@click.option(
    "--args", "--edit-args", "edit_args", metavar="JSON", help="run the held call with these arguments"
)
@click.option("--edit", is_flag=True, help="edit the held call's arguments in $EDITOR first")
@click.option(
    "--value", "raw_value", metavar="JSON", help="what a held LangGraph interrupt() returns (any JSON)"
)
@output_option
@click.pass_context
def approve(
    ctx: click.Context,
    execution_id: str,
    notes: str | None,
    edit_args: str | None,
    edit: bool,
    raw_value: str | None,
    output: str,
) -> None:
    """Approve a held execution (optionally with edited arguments, or an interrupt's value)."""
    if edit and edit_args is not None:
        raise CliError("give --args or --edit, not both", exit_code=USAGE)
    args = parse_args(edit_args)
    value = parse_value(raw_value)
    client, _ = open_client(ctx)
    with client:
        if edit:
            from agent_runtime.cli.editing import edit_held_args

            args = edit_held_args(held_args(client.execution(execution_id)))
        answer = client.resume(execution_id, decision="approved", notes=notes, args=args, value=value)
        emit(answer, output=output)


@click.command()
@click.argument("execution_id")
@click.option("--notes", help="the reviewer's notes (the agent sees them as the call's error)")
@output_option
@click.pass_context
def reject(ctx: click.Context, execution_id: str, notes: str | None, output: str) -> None:
    """Reject a held execution's call."""
    client, _ = open_client(ctx)
    with client:
        emit(client.resume(execution_id, decision="rejected", notes=notes), output=output)
