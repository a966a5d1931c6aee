"""The `agentengine` command: global flags (where and as whom) and the verbs."""

from __future__ import annotations

import click

from agent_runtime.cli import (
    audit_verify,
    completion,
    connectors,
    dev,
    executions,
    forks,
    knowledge,
    logs,
    reviews,
)
from agent_runtime.cli.config import SERVER_ENV, TOKEN_ENV, Options
from agent_runtime.cli.target_flags import add_target_flags


class Cli(click.Group):
    """The root group: Ctrl-C (the way to stop a watch) exits 130 quietly, as a shell expects."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise click.exceptions.Exit(130) from None


@click.group(cls=Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--server", metavar="URL", help=f"the OE's URL (or ${SERVER_ENV})")
@click.option("--token", metavar="TOKEN", help=f"bearer token (or ${TOKEN_ENV}; else the kubeconfig user's)")
@click.option("-n", "--namespace", help="namespace (default: the kubeconfig context's, else default)")
@click.option("--context", help="kubeconfig context (default: the current one)")
@click.option("--kubeconfig", metavar="PATH", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
@click.pass_context
def cli(
    ctx: click.Context,
    server: str | None,
    token: str | None,
    namespace: str | None,
    context: str | None,
    kubeconfig: str | None,
) -> None:
    """Invoke agents, follow executions and review held calls on Agent Engine.

    Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 forbidden or unauthenticated.
    """
    ctx.obj = Options(server=server, token=token, namespace=namespace, context=context, kubeconfig=kubeconfig)


for command in (
    executions.invoke,
    executions.get,
    audit_verify.audit,
    executions.cancel,
    executions.events,
    logs.logs,
    executions.interrupt,
    reviews.reviews,
    reviews.approve,
    reviews.reject,
    connectors.connectors,
    knowledge.knowledge,
    forks.fork,
    completion.completion,
    dev.dev,
):
    cli.add_command(command)

# The same flags after the verb (`get executions -n NS`), except where no OE is talked to.
add_target_flags(
    cli,
    skip={"dev", "completion", "connectors compile", "connectors scaffold", "connectors regenerate",
          "connectors bundle"},
)  # fmt: skip


def main() -> None:
    """The console script."""
    cli(prog_name="agentengine")
