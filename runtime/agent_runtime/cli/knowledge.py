"""`agentengine knowledge add|list|forget`: an Agent's knowledge base.

By default through the OE's client API (`-a AGENT`, with the target flags and the caller's own token), which
checks the caller's right on the Agent and forwards to its Memory server (servers/oe_knowledge.py). With
`--memory-url` it goes straight to a Memory server (e.g. after `kubectl port-forward svc/<agent>-memory
8081`) with the Agent's runtime token (`--token-file`). Nothing here prints a token.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click
import httpx

from agent_runtime.cli.errors import DENIED, ERROR, NOT_FOUND, USAGE, CliError
from agent_runtime.cli.output import emit, output_option

MEMORY_URL_ENV = "AGENTENGINE_MEMORY_URL"
TOKEN_FILE_ENV = "AGENTENGINE_RUNTIME_TOKEN_FILE"  # noqa: S105 (a variable name)
TYPES = {".md": "markdown", ".markdown": "markdown"}
SOURCE_COLUMNS = (
    ("SOURCE", lambda row: row.get("source")),
    ("CHUNKS", lambda row: row.get("chunks")),
    ("TITLE", lambda row: row.get("title")),
    ("DIGEST", lambda row: str(row.get("digest", ""))[:12]),
)


def _token(token_file: str | None) -> str:
    if not token_file:
        raise CliError(
            f"no runtime token: pass --token-file (or ${TOKEN_FILE_ENV}), e.g. the token key of the "
            "<agent>-runtime-token Secret saved to a file",
            exit_code=USAGE,
        )
    try:
        token = Path(token_file).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise CliError(f"--token-file {token_file}: cannot read it ({type(exc).__name__})") from None
    if not token:
        raise CliError(f"--token-file {token_file} is empty; put the runtime token in it", exit_code=USAGE)
    return token


def _problem(detail: Any) -> str:
    if isinstance(detail, list):
        return "; ".join(f"{p.get('field')}: {p.get('problem')}" for p in detail if isinstance(p, dict))
    return str(detail)


def _call(ctx: click.Context, agent: str | None, method: str, **kwargs: Any) -> dict[str, Any]:
    direct = ctx.meta.get("knowledge.direct")
    if direct is None:
        if not agent:
            raise CliError(
                "name the Agent with -a/--agent NAME (or NAMESPACE/NAME), or pass --memory-url to reach a "
                "Memory server directly",
                exit_code=USAGE,
            )
        from agent_runtime.cli.executions import agent_ref
        from agent_runtime.cli.session import open_client

        client, where = open_client(ctx)
        with client:
            return client.knowledge_documents(method, agent=agent_ref(agent, where.namespace), **kwargs)
    url, token = direct
    path = "/knowledge/documents"
    try:
        response = httpx.request(
            method, url + path, headers={"authorization": f"Bearer {token}"}, timeout=300, **kwargs
        )
    except httpx.HTTPError as exc:
        raise CliError(f"the Memory server at {url} is unreachable ({type(exc).__name__})") from None
    if response.status_code == 401:
        raise CliError("the Memory server refused the runtime token (401)", exit_code=DENIED)
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code >= 400:
        code = (
            USAGE
            if response.status_code in (400, 413)
            else NOT_FOUND
            if response.status_code == 404
            else ERROR
        )
        raise CliError(
            f"{body.get('error', response.status_code)}: {_problem(body.get('detail'))}", exit_code=code
        )
    return dict(body)


@click.group()
@click.option(
    "--memory-url",
    metavar="URL",
    envvar=MEMORY_URL_ENV,
    help=f"a Memory server to reach directly, not through the OE (or ${MEMORY_URL_ENV})",
)
@click.option(
    "--token-file",
    metavar="PATH",
    envvar=TOKEN_FILE_ENV,
    help=f"with --memory-url: the Agent's runtime token (or ${TOKEN_FILE_ENV})",
)
@click.pass_context
def knowledge(ctx: click.Context, memory_url: str | None, token_file: str | None) -> None:
    """An Agent's knowledge base: add documents, list and forget them (through the OE by default)."""
    if not memory_url:
        return
    if not memory_url.startswith(("http://", "https://")):
        raise CliError(
            f"--memory-url (or ${MEMORY_URL_ENV}) must be the Memory server's http(s) URL, e.g. "
            "http://127.0.0.1:8081 after kubectl port-forward svc/<agent>-memory 8081",
            exit_code=USAGE,
        )
    ctx.meta["knowledge.direct"] = (memory_url.rstrip("/"), _token(token_file))


def _agent_option(command: Any) -> Any:
    return click.option(
        "-a", "--agent", help="the Agent (NAME or NAMESPACE/NAME), through the OE; not with --memory-url"
    )(command)


@knowledge.command()
@_agent_option
@click.argument("files", nargs=-1, required=True)
@click.option("--source", help="the document's source name (one file only; default: the file's name)")
@click.option("--title", help="the title each chunk is headed with (default: the file's name)")
@click.option("--type", "content_type", type=click.Choice(["markdown", "text"]), help="default: by suffix")
@click.option("--meta", multiple=True, metavar="KEY=VALUE", help="metadata for knowledge.search filters")
@output_option
@click.pass_context
def add(
    ctx: click.Context,
    agent: str | None,
    files: tuple[str, ...],
    source: str | None,
    title: str | None,
    content_type: str | None,
    meta: tuple[str, ...],
    output: str,
) -> None:
    """Add (or replace) documents; FILE `-` reads standard input (needs --source)."""
    if source and len(files) > 1:
        raise CliError("--source names one document; pass one FILE with it", exit_code=USAGE)
    metadata: dict[str, str] = {}
    for item in meta:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--meta {item!r}: write KEY=VALUE", exit_code=USAGE)
        metadata[key] = value
    answers = []
    for name in files:
        if name == "-":
            if not source:
                raise CliError("reading standard input needs --source NAME", exit_code=USAGE)
            text = sys.stdin.read()
        else:
            try:
                text = Path(name).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CliError(f"{name}: cannot read it as UTF-8 text ({type(exc).__name__})") from None
        label = os.path.basename(name) if name != "-" else str(source)
        body = {
            "source": source or label,
            "title": title or label,
            "text": text,
            "content_type": content_type or TYPES.get(Path(name).suffix.lower(), "text"),
            "metadata": {"origin": "cli", **metadata},
        }
        answers.append(_call(ctx, agent, "POST", content=json.dumps(body)))
    columns = (
        ("SOURCE", lambda row: row.get("source")),
        ("STATUS", lambda row: row.get("status")),
        ("CHUNKS", lambda row: row.get("chunks")),
        ("REMOVED", lambda row: row.get("removed")),
    )
    emit({"documents": answers}, output=output, rows=answers, columns=columns)


@knowledge.command(name="list")
@_agent_option
@output_option
@click.pass_context
def list_sources(ctx: click.Context, agent: str | None, output: str) -> None:
    """The documents in the knowledge base."""
    body = _call(ctx, agent, "GET", params={"limit": 1000})
    emit(body, output=output, rows=list(body.get("sources", [])), columns=SOURCE_COLUMNS)


@knowledge.command()
@_agent_option
@click.argument("source")
@click.pass_context
def forget(ctx: click.Context, agent: str | None, source: str) -> None:
    """Remove a document and its chunks."""
    body = _call(ctx, agent, "DELETE", params={"source": source})
    click.echo(f"{source}: {body.get('removed', 0)} chunks removed")
