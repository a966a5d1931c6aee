"""`agentengine audit`: an execution's audit records (`audit ID`) and the check of its hash chain
(`audit verify ID` against the OE, or `audit verify --file F --public-key PEM` offline, issue 34).

Offline, the file is what `GET /execution/{id}/audit` answers (`{"records": [...], "head": {...}}`, saved
with `agentengine audit ID -o json` or curl), or the OE's JSONL export (`OE_AUDIT_EXPORT_FILE`: one record
per line and `{"head": ...}` lines, many executions); the public key is the OE's (the chart's ConfigMap).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from agent_runtime.cli import executions
from agent_runtime.cli.errors import ERROR, USAGE, CliError
from agent_runtime.cli.output import emit, output_option
from agent_runtime.cli.session import open_client


class _AuditGroup(click.Group):
    """`audit ID` shows the records (as before); `audit verify ...` checks the chain."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            args = ["show", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_AuditGroup)
def audit() -> None:
    """The execution's audit records (audit ID), or a check that nobody altered them (audit verify)."""


audit.add_command(executions.audit, name="show")


def _line(execution_id: str, verdict: dict[str, Any]) -> str:
    if verdict.get("intact"):
        signed = "signed head" if verdict.get("head_signed") else "unsigned head"
        return f"{execution_id}: intact ({verdict.get('records')} records, {signed})"
    return f"{execution_id}: broken at record {verdict.get('broken_at')}: {verdict.get('reason')}"


def _read_export(path: Path) -> dict[str, tuple[list[dict[str, Any]], dict[str, Any] | None]]:
    """execution id -> (records, its last head) from a saved audit answer or a JSONL export."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read --file {path}: {exc.strerror or exc}", exit_code=USAGE) from None
    chains: dict[str, tuple[list[dict[str, Any]], dict[str, Any] | None]] = {}
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict) and isinstance(whole.get("records"), list):
        records = [r for r in whole["records"] if isinstance(r, dict)]
        execution_id = str(records[0].get("execution_id")) if records else "(empty)"
        return {execution_id: (records, whole.get("head"))}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise CliError(
                f"--file {path} line {number} is not JSON: pass the OE's JSONL export or a saved "
                "`agentengine audit ID -o json`",
                exit_code=USAGE,
            ) from None
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("head"), dict):
            head = item["head"]
            records, _ = chains.get(str(head.get("execution_id")), ([], None))
            chains[str(head.get("execution_id"))] = (records, head)
        elif "execution_id" in item:
            records, head = chains.setdefault(str(item["execution_id"]), ([], None))
            records.append(item)
    if not chains:
        raise CliError(f"--file {path} holds no audit records", exit_code=USAGE)
    return chains


@audit.command("verify")
@click.argument("execution_id", required=False)
@click.option("--file", "file", type=click.Path(path_type=Path), help="verify a saved copy or export offline")
@click.option("--public-key", "public_key", type=click.Path(path_type=Path), help="the OE's public key (PEM)")
@output_option
@click.pass_context
def verify(
    ctx: click.Context, execution_id: str | None, file: Path | None, public_key: Path | None, output: str
) -> None:
    """Say whether an execution's audit is intact, or where its chain breaks (exit 1 when broken)."""
    if file is None:
        if execution_id is None:
            raise CliError("name an execution (audit verify ID) or a saved copy (--file F)", exit_code=USAGE)
        client, _ = open_client(ctx)
        with client:
            verdicts = {execution_id: client.audit_verify(execution_id)}
    else:
        verdicts = _verify_offline(file, public_key, only=execution_id)
    if output == "table":
        for name, verdict in verdicts.items():
            click.echo(_line(name, verdict))
    else:
        emit(verdicts if file is not None else verdicts[str(execution_id)], output=output)
    if not all(verdict.get("intact") for verdict in verdicts.values()):
        raise click.exceptions.Exit(ERROR)


def _verify_offline(file: Path, public_key: Path | None, *, only: str | None) -> dict[str, dict[str, Any]]:
    # cryptography is imported here only: the other commands stay fast to start.
    from agent_runtime.audit_chain import load_public_keys
    from agent_runtime.audit_chain import verify as verify_chain

    keys = []
    if public_key is not None:
        try:
            keys = load_public_keys([public_key.read_text(encoding="utf-8")])
        except (OSError, ValueError) as exc:
            raise CliError(
                f"--public-key {public_key} is not the OE's Ed25519 public key (PEM): {exc}", exit_code=USAGE
            ) from None
    chains = _read_export(file)
    if only is not None:
        chains = {only: chains.get(only, ([], None))}
    verdicts = {}
    for name, (records, head) in chains.items():
        if head is not None and head.get("signature") and not keys:
            raise CliError(
                "the chain head is signed: pass --public-key (the OE's public key, PEM; the chart's "
                "ConfigMap) to check it",
                exit_code=USAGE,
            )
        verdicts[name] = verify_chain(records, head=head, public_keys=keys, execution_id=name).view()
    return verdicts
