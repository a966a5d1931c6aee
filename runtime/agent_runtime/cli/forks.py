"""`agentengine fork SESSION --agent NS/NAME --execution ID --step N`: session fork (LG-18).

A finished execution's turn again in a new session, from step N: the OE answers the steps before N from
the parent's replay cache and runs the rest live; the parent session is untouched. Prints the new
execution (`--wait`: once it settles).
"""

from __future__ import annotations

import click

from agent_runtime.cli.executions import _wait, agent_ref
from agent_runtime.cli.output import emit, output_option
from agent_runtime.cli.session import open_client


@click.command()
@click.argument("session_id")
@click.option("-a", "--agent", required=True, help="the Agent (NAME, or NAMESPACE/NAME)")
@click.option("--execution", "execution_id", required=True, help="the session's finished execution to fork")
@click.option("--step", type=click.IntRange(1), required=True, help="the first step to run live again")
@click.option("--to-session", help="the new session's id (default: a new one)")
@click.option("--wait", is_flag=True, help="wait until the fork completes, fails or is held for review")
@output_option
@click.pass_context
def fork(
    ctx: click.Context,
    session_id: str,
    agent: str,
    execution_id: str,
    step: int,
    to_session: str | None,
    wait: bool,
    output: str,
) -> None:
    """Fork a session at a step of one of its executions into a new session."""
    client, where = open_client(ctx)
    with client:
        view = client.fork_session(
            agent=agent_ref(agent, where.namespace),
            session_id=session_id,
            execution_id=execution_id,
            step=step,
            to_session=to_session,
        )
        if wait:
            view = _wait(client, str(view["execution_id"]))
    emit(view, output=output)
