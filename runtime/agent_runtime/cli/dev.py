"""`agentengine dev [DIR]`: the agent in DIR on this machine, restarted when its files change."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click

from agent_runtime.cli.config import SERVER_ENV, TOKEN_ENV
from agent_runtime.cli.errors import USAGE, CliError

if TYPE_CHECKING:
    from agent_runtime.devloop.stack import DevStack, ModelChoice

DEFAULT_PORT = 8180  # not 8080: the examples' providers listen there
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
POLL_S = 0.3


def _read_env_file(path: Path, *, given: bool) -> list[str]:
    """NAME=VALUE lines of an env file (blank lines, # comments skipped); none when absent by default."""
    if not path.is_file():
        if given:
            raise CliError(f"--env-file {path}: no such file", exit_code=USAGE)
        return []
    lines = []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise CliError(f"{path}:{number}: write NAME=VALUE", exit_code=USAGE)
        lines.append(f"{name.strip()}={value.strip().strip(chr(34) + chr(39))}")
    return lines


def _parse_set(values: list[str] | tuple[str, ...]) -> dict[str, str]:
    from agent_runtime.contract import is_platform_env

    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep and name and name in os.environ:  # --set NAME: the value this shell holds
            value, sep = os.environ[name], "="
        if not sep or not name:
            raise CliError(
                f"--set {item!r}: write NAME=VALUE (a variable only the Tool Pod gets)", exit_code=USAGE
            )
        if is_platform_env(name):
            raise CliError(
                f"--set {name}: a platform variable; give the tenant's own secrets only", exit_code=USAGE
            )
        out[name] = value
    return out


def _model_choice(model: str | None, model_url: str | None, model_name: str, key_env: str) -> ModelChoice:
    from agent_runtime.devloop.stack import ModelChoice

    if model and model_url:
        raise CliError("give --model scripted[:FILE] or --model-url URL, not both", exit_code=USAGE)
    if model_url:
        if not model_url.startswith(("http://", "https://")):
            raise CliError(
                f"--model-url {model_url!r}: an http(s) URL, e.g. https://api.openai.com/v1", exit_code=USAGE
            )
        if not os.environ.get(key_env):
            raise CliError(
                f"--model-url needs its key in ${key_env} (or name another variable: --model-key-env)"
            )
        return ModelChoice(url=model_url.rstrip("/"), name=model_name, key_env=key_env)
    kind, _, script = (model or "scripted").partition(":")
    if kind != "scripted":
        raise CliError(
            f"--model {model!r}: write scripted or scripted:FILE, or use --model-url", exit_code=USAGE
        )
    path = Path(script).expanduser().resolve() if script else None
    if path is not None:
        from agent_runtime.devloop.scripted_model import ScriptError, load_script

        try:
            load_script(path)
        except ScriptError as exc:
            raise CliError(f"--model: {exc}", exit_code=USAGE) from None
    return ModelChoice(script=path)


@click.command()
@click.argument("directory", default=".", metavar="[DIR]")
@click.option(
    "--entrypoint", metavar="MODULE:APP", help="the App (default: $AGENT_ENTRYPOINT, else DIR/Dockerfile's)"
)
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="the OE's port")
@click.option(
    "--model", metavar="scripted[:FILE]", help="the offline stand-in (default), answering from FILE"
)
@click.option(
    "--model-url", metavar="URL", help="an OpenAI-compatible endpoint, e.g. https://api.openai.com/v1"
)
@click.option("--model-name", default="gpt-4o-mini", show_default=True, help="the model --model-url serves")
@click.option(
    "--model-key-env",
    default=DEFAULT_KEY_ENV,
    show_default=True,
    help="the variable holding --model-url's key (only the Tool Pod gets it)",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="NAME=VALUE",
    help="a secret for the Tool Pod; NAME alone takes this shell's $NAME (repeatable)",
)
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="NAME=VALUE lines of secrets for the Tool Pod (default: DIR/.env when present)",
)
@click.option(
    "--db",
    "databases",
    multiple=True,
    metavar="CONNECTOR=URL",
    help="a database connector's address, e.g. shop-db=postgresql://user:pw@127.0.0.1:5432/shop (repeatable)",
)
@click.option(
    "--connector-url",
    "connector_urls",
    multiple=True,
    metavar="CONNECTOR=URL",
    help="where an OpenAPI connector's API listens, e.g. echo=http://127.0.0.1:9000 (repeatable)",
)
@click.option(
    "--memory/--no-memory", default=None, help="run the Memory server (default: when the code uses it)"
)
@click.option("--no-reload", is_flag=True, help="do not restart the AER and Tool Pod when a file changes")
def dev(
    directory: str,
    entrypoint: str | None,
    port: int,
    model: str | None,
    model_url: str | None,
    model_name: str,
    model_key_env: str,
    sets: tuple[str, ...],
    env_file: Path | None,
    databases: tuple[str, ...],
    connector_urls: tuple[str, ...],
    memory: bool | None,
    no_reload: bool,
) -> None:
    """Run the agent in DIR locally: the OE (SQLite), the AER and the Tool Pod, as the operator would.

    A change to a file of DIR restarts the AER and the Tool Pod; the OE and its executions stay.
    Ctrl-C stops everything and removes every file it made.
    """
    from agent_runtime.devloop import project as projects
    from agent_runtime.devloop.stack import DevOptions, DevStack

    if not 1 <= port <= 65535:
        raise CliError(f"--port {port}: use 1-65535", exit_code=USAGE)
    env_lines = _read_env_file(env_file or Path(directory) / ".env", given=env_file is not None)
    tool_env = _parse_set([*env_lines, *sets])
    choice = _model_choice(model, model_url, model_name, model_key_env)
    try:
        project = projects.resolve(directory, entrypoint=entrypoint, memory=memory)
        parsed_dbs = tuple(projects.parse_database_url(spec) for spec in databases)
        parsed_urls = tuple(projects.parse_connector_url(spec) for spec in connector_urls)
    except projects.DevError as exc:
        raise CliError(str(exc)) from None
    options = DevOptions(
        project=project,
        oe_port=port,
        model=choice,
        tool_env=tool_env,
        databases=parsed_dbs,
        connector_urls=parsed_urls,
    )
    stack = DevStack(options=options, say=click.echo)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    try:
        try:
            stack.start()
        except projects.DevError as exc:
            raise CliError(str(exc)) from None
        _print_ready(stack, seconds=time.monotonic() - started)
        _supervise(stack, reload=not no_reload)
    except KeyboardInterrupt:
        click.echo("\nstopping...")
    finally:
        stack.stop()
        signal.signal(signal.SIGTERM, previous)
    click.echo("stopped: no process and no directory left behind")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _print_ready(stack: DevStack, *, seconds: float) -> None:
    project, model = stack.project, stack.options.model
    model_line = (
        f"{model.url} ({model.name}; key from ${model.key_env}, given to the Tool Pod only)"
        if model.url
        else f"{stack.url('model')}/v1 (scripted stand-in{': ' + str(model.script) if model.script else ''})"
    )
    lines = [
        f"agent {project.agent} ({project.entrypoint}) from {project.directory}",
        f"  OE         {stack.oe_url}",
        *(
            [f"  console    {stack.oe_url}/console (sign in with the token below)"]
            if _has_console(stack)
            else []
        ),
        f"  AER        {stack.url('aer')}",
        f"  Tool Pod   {stack.url('tool')}",
        *([f"  Memory     {stack.url('memory')}"] if "memory" in stack.ports else []),
        f"  model      {model_line}",
        f"  files      {stack.workdir} (logs, keys, SQLite; removed at exit)",
        f"ready in {seconds:.1f} s. In another terminal:",
        f"  export {SERVER_ENV}={stack.oe_url} {TOKEN_ENV}={stack.client_token}",
        f"  agentengine invoke {project.agent} --text 'hello' --follow",
        "Editing a file of the directory restarts the AER and the Tool Pod. Ctrl-C stops everything.",
    ]
    for line in lines:
        click.echo(line)


def _has_console(stack: DevStack) -> bool:
    """Whether this OE serves the console (the chart's oe.console.enabled; on by default)."""
    import httpx

    try:
        return httpx.get(f"{stack.oe_url}/console", timeout=5).status_code != 404
    except httpx.TransportError:
        return False


def _supervise(stack: DevStack, *, reload: bool) -> None:
    from agent_runtime.devloop import watch

    seen = watch.snapshot(stack.project.directory)
    reported: set[str] = set()
    while True:
        time.sleep(POLL_S)
        for name in stack.dead():
            if name in reported:
                continue
            reported.add(name)
            if name in ("oe", "model", "memory"):
                raise CliError(f"{name} exited: {stack.tail(name)}; restart agentengine dev")
            click.echo(f"{name} exited: {stack.tail(name)} (fix the file; it restarts on the next change)")
        if not reload:
            continue
        now = watch.snapshot(stack.project.directory)
        files = watch.changed(seen, now)
        if not files:
            continue
        seen = now
        shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        click.echo(f"changed: {shown}; restarting the AER and the Tool Pod")
        began = time.monotonic()
        try:
            stack.restart_runtimes()
        except Exception as exc:  # a broken edit: say why, keep the OE, wait for the next change
            message = str(exc) if exc.__class__.__name__ == "DevError" else f"{type(exc).__name__}: {exc}"
            click.echo(f"restart failed: {message} (fix it; the next change retries)")
            reported.update(name for name in ("aer", "tool") if name in stack.dead())
            continue
        reported.difference_update({"aer", "tool"})
        click.echo(
            f"reloaded in {time.monotonic() - began:.1f} s (AER and Tool Pod; the OE kept its executions)"
        )
