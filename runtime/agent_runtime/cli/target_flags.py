"""Where and as whom, after the verb too: `agentengine get executions -n team-a` as `kubectl get pods -n x`.

The root group takes `--server`, `--token`, `-n/--namespace`, `--context` and `--kubeconfig` before the verb;
`add_target_flags` gives every command that talks to the OE the same flags after it. A flag given after the
verb wins over the same flag given before it (the nearer one is what the person meant).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

import click

from agent_runtime.cli.config import SERVER_ENV, TOKEN_ENV, Options

# (option declarations, the Options field, help)
TARGET_FLAGS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("--server",), "server", f"the OE's URL (or ${SERVER_ENV})"),
    (("--token",), "token", f"bearer token (or ${TOKEN_ENV}; else the kubeconfig user's)"),
    (("-n", "--namespace"), "namespace", "namespace (default: the kubeconfig context's, else default)"),
    (("--context",), "context", "kubeconfig context (default: the current one)"),
    (("--kubeconfig",), "kubeconfig", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config)"),
)


def _override(field_name: str) -> Any:
    def callback(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value is None:
            return
        # The command's own context gets its copy of the options; find_object() looks there first.
        current = ctx.find_object(Options) or Options()
        ctx.obj = dataclasses.replace(current, **{field_name: value})

    return callback


def _leaves(command: click.Command, path: str) -> list[tuple[str, click.Command]]:
    if isinstance(command, click.Group):
        found = []
        for name, sub in command.commands.items():
            found += _leaves(sub, f"{path} {name}".strip())
        return found
    return [(path, command)]


def add_target_flags(group: click.Group, *, skip: Collection[str]) -> None:
    """Give every leaf command under `group` (by its path, e.g. `get executions`) the target flags, except
    those in `skip` and any flag a command already defines."""
    for path, command in _leaves(group, ""):
        if path in skip or path.split(" ", 1)[0] in skip:
            continue
        taken = {opt for param in command.params for opt in getattr(param, "opts", [])}
        for declarations, field_name, help_text in TARGET_FLAGS:
            if taken & set(declarations):
                continue
            command.params.append(
                click.Option(
                    list(declarations),
                    help=help_text,
                    expose_value=False,
                    callback=_override(field_name),
                    metavar="URL" if field_name == "server" else None,
                )
            )
